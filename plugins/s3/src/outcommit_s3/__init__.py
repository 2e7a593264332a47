"""outcommit for S3: the ``s3``/``s3a`` store and the zero-rename magic and staging committers."""

from .multipart import S3MultipartUploads, multipart_etag
from .store import S3_CAPABILITIES, S3Store

__all__ = ["S3_CAPABILITIES", "S3MultipartUploads", "S3Store", "multipart_etag"]
