"""S3 multipart uploads as the store's delayed-completion capability.

One process initiates an upload and uploads its parts; another completes or aborts it
later, knowing only the bucket, key, upload id and the ordered part etags. Completion
is made idempotent here, which is what lets a job commit be repeated: completing an
upload that is already complete is success, and ``NoSuchUpload`` is only a failure when
the destination object does not carry the etag these exact parts produce.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from typing import Any, Protocol

from outcommit.errors import UploadGoneError, UploadPendingError
from outcommit.multipart import MultipartUploads, PendingUpload
from outcommit.retry import RetryLater, RetryPolicy
from outcommit.store import FileInfo

from .settings import S3Settings


class S3Access(Protocol):
    """What the uploads use of their store (``S3Store``, which makes them): named here,
    so this module needs not import the store that imports it."""

    settings: S3Settings
    retry: RetryPolicy

    @property
    def client(self) -> Any: ...
    def split(self, path: str) -> tuple[str, str]: ...
    def url(self, path: str) -> str: ...
    def info(self, path: str) -> FileInfo | None: ...

log = logging.getLogger(__name__)

MAX_PARTS = 10_000
MAX_PART_SIZE = 5 * 1024**3      # S3's limits: 5 GiB per part,
MAX_OBJECT_SIZE = 5 * 1024**4    # 5 TiB per object


def describe_error(exc: BaseException) -> str:
    """What S3 (or the network) answered, for a message: '503 SlowDown', 'ConnectionClosedError'."""
    code, status = error_code(exc)
    if status:
        return f"S3 answered {status} {code}".rstrip()
    return f"no answer from S3 ({type(exc).__name__}: {exc})"


def error_code(exc: BaseException) -> tuple[str, int]:
    """(S3 error code, HTTP status) of a botocore ClientError; ('', 0) for anything else."""
    response = getattr(exc, "response", None)
    if not isinstance(response, dict):
        return "", 0
    code = str(response.get("Error", {}).get("Code", ""))
    status = int(response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
    return code, status


def multipart_etag(part_etags: Sequence[str]) -> str | None:
    """The etag S3 gives an object completed from these parts (md5 of the part md5s, -N).

    None when a part etag is not an MD5 (e.g. SSE-KMS): then no proof is possible.
    """
    try:
        digests = b"".join(bytes.fromhex(e.strip('"')) for e in part_etags)
    except ValueError:
        return None
    if len(digests) != 16 * len(part_etags):
        return None
    return f"{hashlib.md5(digests).hexdigest()}-{len(part_etags)}"


def _parts(etags: Sequence[str]) -> list[dict[str, Any]]:
    return [{"PartNumber": n, "ETag": f'"{e.strip(chr(34))}"'} for n, e in enumerate(etags, 1)]


class S3MultipartUploads(MultipartUploads):
    """Multipart operations of one S3 store, on store paths (``bucket/key``)."""

    def __init__(self, store: S3Access) -> None:
        self.store = store
        self.part_size = store.settings.part_size
        self.max_parts, self.max_part_size, self.max_object_size = MAX_PARTS, MAX_PART_SIZE, MAX_OBJECT_SIZE

    @property
    def client(self) -> Any:
        return self.store.client

    def initiate(self, path: str) -> str:
        bucket, key = self.store.split(path)
        # Encryption, ACL and storage class are set where the object is created.
        response = self.client.create_multipart_upload(Bucket=bucket, Key=key,
                                                       **self.store.settings.object_args())
        return str(response["UploadId"])

    def upload_part(self, path: str, upload_id: str, part_number: int, data: bytes) -> str:
        if not 1 <= part_number <= MAX_PARTS:
            raise ValueError(f"part number {part_number} outside 1..{MAX_PARTS}")
        bucket, key = self.store.split(path)
        response = self.client.upload_part(Bucket=bucket, Key=key, UploadId=upload_id,
                                           PartNumber=part_number, Body=data)
        return str(response["ETag"]).strip('"')

    def complete(self, path: str, upload_id: str, etags: Sequence[str],
                 if_none_match: bool = False) -> str:
        """Complete an upload; idempotent, and patient with a throttled or silent server.

        When S3 does not answer with the completion (503 SlowDown, a 500, a reset or
        timed-out connection), whether it happened is decided by evidence, not guessed:
        an upload still pending was not completed, and the request is retried with backoff
        (``outcommit.retry.*``, on top of botocore's own retries); an upload gone whose
        object carries these parts' etag was completed (perhaps by the very request whose
        answer was lost); anything else was aborted or replaced.
        """
        if not etags:
            raise ValueError(f"upload {upload_id} to {path} has no parts")
        bucket, key = self.store.split(path)
        kwargs: dict[str, Any] = {"Bucket": bucket, "Key": key, "UploadId": upload_id,
                                  "MultipartUpload": {"Parts": _parts(etags)}}
        if if_none_match:
            kwargs["IfNoneMatch"] = "*"

        def once() -> str:
            try:
                response = self.client.complete_multipart_upload(**kwargs)
                return str(response["ETag"]).strip('"')
            except Exception as exc:
                code, status = error_code(exc)
                if code in ("PreconditionFailed", "ConditionalRequestConflict") or status == 412:
                    raise FileExistsError(f"{self.store.url(path)} exists (If-None-Match)") from exc
                if code != "NoSuchUpload" and status != 404:
                    if 400 <= status < 500 and status not in (408, 429):
                        raise  # refused as such (AccessDenied, InvalidPart...): no retry helps
                    if self.is_pending(path, upload_id) is not False:
                        raise RetryLater(exc) from exc
                return self._completed_before(path, upload_id, etags, code or str(status), exc)

        try:
            return self.store.retry.call(once, retry_if=lambda e: isinstance(e, RetryLater),
                                         what=f"completion of upload {upload_id}")
        except RetryLater as exc:
            raise UploadPendingError(
                f"upload {upload_id} to {self.store.url(path)} could not be completed: "
                f"{describe_error(exc.cause)}, {self.store.retry.attempts} times. The upload is "
                "still pending: nothing was lost, and job commit can be retried (or the job "
                "aborted). Persistent throttling: lower outcommit.committer.threads") from exc.cause

    def holds(self, path: str, upload_id: str, etags: Sequence[str]) -> bool:
        """The object's etag is the one these exact parts produce (md5 of the part md5s, -N)."""
        expected = multipart_etag(etags)
        current = self.store.info(path)
        return expected is not None and current is not None and current.etag == expected

    def _completed_before(self, path: str, upload_id: str, etags: Sequence[str], code: str,
                          cause: BaseException) -> str:
        """The upload is not pending: success if its object holds exactly these parts."""
        expected = multipart_etag(etags)
        current = self.store.info(path)
        if expected is not None and current is not None and current.etag == expected:
            log.info("upload %s to %s was already completed with these parts", upload_id,
                     self.store.url(path))
            return expected
        raise UploadGoneError(
            f"upload {upload_id} to {self.store.url(path)} could not be completed ({code}) and is "
            "no longer pending, and the object there does not hold its parts: the upload was "
            "aborted (by a job abort, 'outcommit uploads abort' or a bucket lifecycle rule) or the "
            "object was replaced") from cause

    def is_pending(self, path: str, upload_id: str) -> bool | None:
        """Is the upload still pending? None when S3 would not say (throttled, unreachable)."""
        bucket, key = self.store.split(path)
        try:
            self.client.list_parts(Bucket=bucket, Key=key, UploadId=upload_id, MaxParts=1)
        except Exception as exc:
            code, status = error_code(exc)
            if code == "NoSuchUpload" or status == 404:
                return False
            return None
        return True

    def abort(self, path: str, upload_id: str) -> bool:
        bucket, key = self.store.split(path)
        try:
            self.client.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id)
        except Exception as exc:
            code, status = error_code(exc)
            if code == "NoSuchUpload" or status == 404:
                return False
            raise
        return True

    def list_pending(self, directory: str) -> list[PendingUpload]:
        bucket, key = self.store.split(directory.rstrip("/"))
        # The trailing slash: 'out/dataset1/' must never match 'out/dataset10/...'.
        prefix = f"{key.rstrip('/')}/" if key else ""
        found: list[PendingUpload] = []
        kwargs: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix}
        while True:
            page = self.client.list_multipart_uploads(**kwargs)
            for upload in page.get("Uploads", []) or []:
                if not str(upload["Key"]).startswith(prefix):
                    continue  # a store that ignores Prefix must not widen the blast radius
                found.append(PendingUpload(path=f"{bucket}/{upload['Key']}",
                                           upload_id=str(upload["UploadId"]),
                                           initiated=upload.get("Initiated")))
            if not page.get("IsTruncated"):
                return found
            kwargs["KeyMarker"] = page.get("NextKeyMarker", "")
            kwargs["UploadIdMarker"] = page.get("NextUploadIdMarker", "")
