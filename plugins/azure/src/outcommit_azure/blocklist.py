"""Azure Blob block lists as the store's delayed-completion interface (``BlockLists``).

A block blob is written in two steps: Put Block stages a block under the blob's name
(uncommitted: invisible, no blob exists yet), Put Block List makes the blob from an
ordered list of block ids in one atomic request. The ``blocklist`` committer stages a
task's blocks under their final names and commits each list at job commit: nothing is
copied, and one request per file makes the output visible.

How it maps onto the multipart interface:

* ``initiate`` makes an *upload id* on the client (32 hex digits): it names the blocks of
  one write. No request.
* ``upload_part`` is one Put Block; the block id is ``base64(upload id + 6-digit part
  number)``. Every id has the same length, as Azure requires for the blocks of one blob
  (a writer with another id length under the same name is refused with 400 until the
  name's next commit or the service's cleanup). An empty part stages nothing.
* ``complete`` is one Put Block List of the upload's own ids (any other id is refused:
  a tampered pending file cannot commit another upload's blocks), with ``If-None-Match: *``
  when asked, and the upload id as the blob's metadata (``outcommit_upload``). A repeated
  completion is success when the blob's committed block list is exactly these ids
  (:meth:`AzureBlockLists.holds`, one Get Block List); for an empty file, whose list has
  no ids, when its metadata names this upload (one Get Blob Properties): any blob put
  whole also has an empty committed list, so the list alone proves nothing there.
* ``abort`` commits nothing and deletes nothing: Azure has no request that removes one
  write's uncommitted blocks. Deleting the blob would remove them, but also a blob that
  another writer committed meanwhile (Delete Blob takes no precondition that tells an
  uncommitted name from a committed one; Azurite ignores ``If-None-Match`` on it). What
  happens to the blocks instead: the service discards a name's uncommitted blocks when
  a block list is committed for that name (the winning attempt's commit discards the
  losing attempts' blocks of the same file) or when a blob is put whole there, and
  otherwise one week after the last block was staged.
* ``list_pending`` lists names under a directory that have uncommitted blocks and no
  committed blob (listing with ``include=uncommittedblobs``, minus the plain listing):
  the service lists a name once, so a name that holds a committed blob hides the blocks
  staged for its next version. ``pending_unlisted`` asks such a name (one Get Block List):
  the job replacing yesterday's ``report.csv`` finds its own blocks there. An empty
  file stages no block, so nothing of its upload can be gone: always pending.
"""

from __future__ import annotations

import base64
import binascii
import re
import uuid
from collections.abc import Sequence
from typing import Any, Protocol

from outcommit.errors import StoreError, UploadGoneError
from outcommit.multipart import DEFAULT_PART_SIZE, BlockLists, PendingUpload

from .errors import translated


class BlobAccess(Protocol):
    """What the block lists use of their store (``AzureStore``, which makes them): named
    here, so this module needs not import the store that imports it."""

    @property
    def service(self) -> Any: ...  # azure.storage.blob.BlobServiceClient
    def url(self, path: str) -> str: ...
    def translate_error(self, exc: BaseException, operation: str, path: str | None) -> StoreError | None: ...

#: Azure's limits: 50,000 committed blocks per blob, 4,000 MiB per block.
MAX_BLOCKS = 50_000
MAX_BLOCK_SIZE = 4000 * 1024 * 1024
#: A part with no bytes stages nothing; an empty file commits an empty block list.
EMPTY_BLOCK = "empty"
#: Blob metadata naming the upload a block list was committed by (proves an empty file's).
UPLOAD_METADATA = "outcommit_upload"

_UPLOAD_ID = re.compile(r"[0-9a-f]{32}")


def block_id(upload_id: str, part_number: int) -> str:
    """``base64(<32 hex digits><6-digit part number>)``: the same length for every block."""
    return base64.b64encode(f"{upload_id}{part_number:06d}".encode()).decode()


def check_block_ids(upload_id: str, ids: Sequence[str]) -> list[str]:
    """The block ids to commit, each proven to be this upload's part 1, 2, ... in order."""
    if not _UPLOAD_ID.fullmatch(upload_id):
        raise ValueError(f"upload id {upload_id!r} is not 32 hex digits: not a block-list upload")
    wanted = []
    for number, value in enumerate(ids, 1):
        if value == EMPTY_BLOCK:
            if len(ids) != 1:
                raise ValueError("an empty block may only stand alone (an empty file)")
            continue
        try:
            decoded = base64.b64decode(value, validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            raise ValueError(f"block id {value!r} is not base64") from None
        if decoded != f"{upload_id}{number:06d}":
            raise ValueError(f"block id {value!r} is not part {number} of upload {upload_id}")
        wanted.append(value)
    return wanted


class AzureBlockLists(BlockLists):
    """Put Block / Put Block List on store paths (``container/blob``)."""

    max_parts = MAX_BLOCKS
    max_part_size = MAX_BLOCK_SIZE
    max_object_size = MAX_BLOCKS * MAX_BLOCK_SIZE

    def __init__(self, store: BlobAccess, part_size: int = DEFAULT_PART_SIZE) -> None:
        self.store = store
        self.part_size = part_size

    def _blob(self, path: str) -> Any:
        container, _, blob = path.partition("/")
        return self.store.service.get_blob_client(container, blob)

    def translate_error(self, exc: BaseException, operation: str, path: str | None) -> StoreError | None:
        return self.store.translate_error(exc, operation, path)

    def initiate(self, path: str) -> str:
        return uuid.uuid4().hex  # no request: the id only names this write's blocks

    @translated
    def upload_part(self, path: str, upload_id: str, part_number: int, data: bytes) -> str:
        if not 1 <= part_number <= MAX_BLOCKS:
            raise ValueError(f"part number {part_number} outside 1..{MAX_BLOCKS}")
        if not data:
            return EMPTY_BLOCK
        ident = block_id(upload_id, part_number)
        self._blob(path).stage_block(ident, data, length=len(data))
        return ident

    @translated
    def complete(self, path: str, upload_id: str, etags: Sequence[str],
                 if_none_match: bool = False) -> str:
        """One Put Block List; success too when the blob already holds exactly these blocks."""
        from azure.core.exceptions import HttpResponseError, ResourceExistsError
        from azure.storage.blob import BlobBlock

        if not etags:
            raise ValueError(f"upload {upload_id} to {path} has no blocks")
        ids = check_block_ids(upload_id, etags)
        headers = {"If-None-Match": "*"} if if_none_match else {}
        try:
            result = self._blob(path).commit_block_list([BlobBlock(block_id=i) for i in ids],
                                                        headers=headers,
                                                        metadata={UPLOAD_METADATA: upload_id})
            return str(result.get("etag", "")).strip('"')
        except ResourceExistsError:
            if self.holds(path, upload_id, etags):  # our own earlier completion
                return ""
            raise FileExistsError(f"{self.store.url(path)} exists (If-None-Match: *)") from None
        except HttpResponseError as exc:
            if exc.status_code == 412:
                if self.holds(path, upload_id, etags):
                    return ""
                raise FileExistsError(f"{self.store.url(path)} exists (If-None-Match: *)") from None
            code = getattr(exc, "error_code", None)
            if exc.status_code != 400 or str(getattr(code, "value", code)) != "InvalidBlockList":
                raise
            if self.holds(path, upload_id, etags):
                return ""
            raise UploadGoneError(
                f"the blocks of upload {upload_id} to {self.store.url(path)} are gone: another "
                "block list was committed for this name (another job or writer), a blob was put "
                "there, or they were staged more than a week ago. Rerun the job") from exc

    def check_parts(self, upload_id: str, etags: Sequence[str]) -> None:
        check_block_ids(upload_id, etags)

    @translated
    def holds(self, path: str, upload_id: str, etags: Sequence[str]) -> bool:
        """The blob is this upload's: its committed block list is exactly these blocks (one
        Get Block List), or, for an empty file, its metadata names this upload."""
        from azure.core.exceptions import ResourceNotFoundError

        try:
            ids = check_block_ids(upload_id, etags)
        except ValueError:
            return False
        try:
            if not ids:  # every blob put whole has an empty committed list too
                properties = self._blob(path).get_blob_properties()
                return bool((properties.metadata or {}).get(UPLOAD_METADATA) == upload_id)
            committed, _ = self._blob(path).get_block_list("committed")
        except ResourceNotFoundError:
            return False
        return [b.id for b in committed] == ids

    @translated
    def pending_unlisted(self, path: str, upload_id: str, etags: Sequence[str]) -> bool:
        """Every block of this upload is staged, uncommitted, under ``path`` (one Get Block
        List; the listing cannot show it where a blob is committed). An empty file's upload
        stages nothing that could be lost: pending until completed."""
        from azure.core.exceptions import ResourceNotFoundError

        try:
            ids = check_block_ids(upload_id, etags)
        except ValueError:
            return False
        if not ids:
            return True
        try:
            _, uncommitted = self._blob(path).get_block_list("uncommitted")
        except ResourceNotFoundError:
            return False
        return set(ids) <= {b.id for b in uncommitted}

    def abort(self, path: str, upload_id: str) -> bool:
        """Nothing to abort: uncommitted blocks are discarded by the service (module docstring)."""
        return False

    @translated
    def list_pending(self, directory: str) -> list[PendingUpload]:
        container, _, key = directory.rstrip("/").partition("/")
        prefix = f"{key.rstrip('/')}/" if key else ""  # never an adjacent prefix
        client = self.store.service.get_container_client(container)
        every = {b.name for b in client.list_blobs(name_starts_with=prefix,
                                                   include=["uncommittedblobs"])}
        committed = {b.name for b in client.list_blobs(name_starts_with=prefix)}
        return [PendingUpload(path=f"{container}/{name}", upload_id="")
                for name in sorted(every - committed) if name.startswith(prefix)]
