"""The S3 binding: multipart uploads, ``outcommit.s3.`` settings, Hadoop's ``s3a`` URIs."""

from __future__ import annotations

from typing import ClassVar

from outcommit import capabilities as caps
from outcommit.committers.delayed.committer import DelayedCompletionCommitter

from ..settings import ABORT_PENDING, ABORT_PENDING_SCOPE, INLINE_LIMIT, SCHEMES


class MultipartCommitter(DelayedCompletionCommitter):
    """Base of the committers that complete S3 multipart uploads at job commit."""

    requires: ClassVar[tuple[str, ...]] = (caps.MULTIPART_DELAYED_COMPLETION, caps.CREATE_EXCLUSIVE)
    abort_pending_key = ABORT_PENDING
    sweep_scope_key = ABORT_PENDING_SCOPE
    inline_limit_key = INLINE_LIMIT
    uri_schemes = ("s3a", "s3", "s3n")
    made_for: ClassVar[tuple[str, ...]] = SCHEMES  # the uploads are S3's, the pendingsets name s3a://
