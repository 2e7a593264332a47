"""``memmp://``: the in-memory store with S3's multipart uploads, and no rename.

What the delayed-completion committers (:mod:`outcommit.committers.delayed`) need of a
store, in one process and without a server: uploads with ids, parts numbered 1..10000,
every part but the last at least ``outcommit.memmp.min-part-size`` bytes (S3's 5 MiB by
default), part etags, completion that checks the part list (``InvalidPart``,
``InvalidPartOrder``, ``EntityTooSmall``), refuses an unknown or aborted upload
(``NoSuchUpload``) and honours ``If-None-Match``; nothing is visible before completion.
Files live in fsspec's global memory filesystem (the ``memory://`` store's), uploads in
this module, both under the memory store's lock.
"""

from __future__ import annotations

import hashlib
import uuid
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone

from .. import capabilities as caps
from ..capabilities import Capabilities
from ..config import Config
from ..errors import UploadGoneError
from ..multipart import MultipartUploads, PendingUpload
from ..store import FileInfo
from .memory import _LOCK, MemoryStore

MIN_PART_SIZE_KEY = "outcommit.memmp.min-part-size"
PART_SIZE_KEY = "outcommit.memmp.part-size"
CONFIG_KEYS = {
    MIN_PART_SIZE_KEY: "memmp://: bytes every part but the last must have, as S3's 5 MiB "
                       "(default 5242880; tests set it small)",
    PART_SIZE_KEY: "memmp://: bytes per part a writer uploads (default 16777216)",
}
MAX_PARTS = 10_000
S3_MIN_PART_SIZE = 5 * 1024**2

MEMMP_CAPABILITIES = Capabilities.of(
    caps.MULTIPART_DELAYED_COMPLETION,
    caps.CREATE_EXCLUSIVE,
    caps.LISTING_CONSISTENT,
)


class InvalidPart(ValueError):
    """A listed part was not uploaded to this upload, or its etag differs (S3's InvalidPart)."""


class InvalidPartOrder(ValueError):
    """Part numbers not in ascending order (S3's InvalidPartOrder)."""


class EntityTooSmall(ValueError):
    """A part other than the last is smaller than the minimum part size."""


@dataclass
class _Upload:
    path: str
    upload_id: str
    initiated: datetime
    parts: dict[int, tuple[str, bytes]] = field(default_factory=dict)


@dataclass(frozen=True)
class _Completed:
    path: str
    etags: tuple[str, ...]
    etag: str
    #: The MemoryFile made, weakly: replaced or deleted, the object is no longer ours, and a
    #: strong reference here would keep its bytes in memory for the life of the process.
    file: weakref.ref[object]


# Every memmp store of the process shares the uploads, as they share fsspec's memory files.
_PENDING: dict[str, _Upload] = {}
_COMPLETED: dict[str, _Completed] = {}


def _forget_when_gone(upload_id: str) -> Callable[[weakref.ref[object]], None]:
    """Drop the upload's record once its file is gone (deleted or replaced, then freed): the
    record says nothing of an object that no longer exists, and would pile up forever."""
    def forget(ref: weakref.ref[object]) -> None:
        # Called by the garbage collector, maybe while this thread holds _LOCK: no lock
        # (one dict operation); only the record of this very file.
        done = _COMPLETED.get(upload_id)
        if done is not None and done.file is ref:
            _COMPLETED.pop(upload_id, None)
    return forget


def multipart_etag(etags: Sequence[str]) -> str:
    """S3's etag of a completed upload: md5 of the part md5s, ``-N``."""
    digests = b"".join(bytes.fromhex(e) for e in etags)
    return f"{hashlib.md5(digests).hexdigest()}-{len(etags)}"


class MemoryMultipartUploads(MultipartUploads):
    """S3's multipart semantics over the memory filesystem."""

    def __init__(self, store: MemoryMultipartStore, min_part_size: int, part_size: int) -> None:
        self.store = store
        self.min_part_size = min_part_size
        self.part_size = part_size

    def initiate(self, path: str) -> str:
        upload_id = uuid.uuid4().hex
        with _LOCK:
            _PENDING[upload_id] = _Upload(path, upload_id, datetime.now(timezone.utc))
        return upload_id

    def upload_part(self, path: str, upload_id: str, part_number: int, data: bytes) -> str:
        if not 1 <= part_number <= MAX_PARTS:
            raise ValueError(f"part number {part_number} outside 1..{MAX_PARTS}")
        etag = hashlib.md5(data).hexdigest()
        with _LOCK:
            self._pending(path, upload_id).parts[part_number] = (etag, bytes(data))
        return etag

    def complete(self, path: str, upload_id: str, etags: Sequence[str],
                 if_none_match: bool = False) -> str:
        return self.complete_parts(path, upload_id, list(enumerate(etags, 1)), if_none_match)

    def complete_parts(self, path: str, upload_id: str, parts: Sequence[tuple[int, str]],
                       if_none_match: bool = False) -> str:
        """S3's CompleteMultipartUpload: ``parts`` as (part number, etag), ascending."""
        if not parts:
            raise ValueError(f"upload {upload_id} to {self.store.url(path)} has no parts")
        etags = tuple(e.strip('"') for _, e in parts)
        with _LOCK:
            upload = _PENDING.get(upload_id)
            if upload is None or upload.path != path:
                return self._completed_before(path, upload_id, etags)
            data = self._assemble(upload, parts)
            mem = self.store._mem
            if if_none_match and (path in mem.store or path in mem.pseudo_dirs):
                raise FileExistsError(f"{self.store.url(path)} exists (If-None-Match)")
            MemoryStore.write_bytes(self.store, path, data)
            etag = multipart_etag(etags)
            made = weakref.ref(mem.store[path], _forget_when_gone(upload_id))
            _COMPLETED[upload_id] = _Completed(path, etags, etag, made)
            del _PENDING[upload_id]
            return etag

    def _assemble(self, upload: _Upload, parts: Sequence[tuple[int, str]]) -> bytes:
        numbers = [n for n, _ in parts]
        if numbers != sorted(set(numbers)):
            raise InvalidPartOrder(f"upload {upload.upload_id}: part numbers {numbers} not ascending")
        chunks = []
        for number, etag in parts:  # every listed part first: a wrong list is InvalidPart
            held = upload.parts.get(number)
            if held is None or held[0] != etag.strip('"'):
                raise InvalidPart(f"upload {upload.upload_id}: part {number} with etag {etag} "
                                  "was not uploaded")
            chunks.append(held[1])
        for (number, _), chunk in zip(parts[:-1], chunks[:-1], strict=True):
            if len(chunk) < self.min_part_size:
                raise EntityTooSmall(f"upload {upload.upload_id}: part {number} has "
                                     f"{len(chunk)} bytes, under {self.min_part_size}")
        return b"".join(chunks)

    def _completed_before(self, path: str, upload_id: str, etags: tuple[str, ...]) -> str:
        """Not pending: success only when the object there is this upload, these parts (S3)."""
        done = self._held(path, upload_id, etags)
        if done is not None:
            return done.etag
        raise UploadGoneError(f"upload {upload_id} to {self.store.url(path)} could not be completed "
                              "(NoSuchUpload): it was aborted, never initiated, or its object "
                              "was replaced")

    def holds(self, path: str, upload_id: str, etags: Sequence[str]) -> bool:
        return self._held(path, upload_id, etags) is not None

    def _held(self, path: str, upload_id: str, etags: Sequence[str]) -> _Completed | None:
        """The upload's record when the object at ``path`` is still its file, these parts."""
        with _LOCK:
            done = _COMPLETED.get(upload_id)
            file = None if done is None else done.file()
            # A freed file's weakref gives None, as does a path with no file: not ours.
            ours = (done is not None and file is not None and done.path == path
                    and done.etags == tuple(etags) and self.store._mem.store.get(path) is file)
            return done if ours else None

    def _pending(self, path: str, upload_id: str) -> _Upload:
        upload = _PENDING.get(upload_id)
        if upload is None or upload.path != path:
            raise UploadGoneError(f"upload {upload_id} to {self.store.url(path)}: NoSuchUpload")
        return upload

    def abort(self, path: str, upload_id: str) -> bool:
        with _LOCK:
            upload = _PENDING.get(upload_id)
            if upload is None or upload.path != path:
                return False
            del _PENDING[upload_id]
            return True

    def list_pending(self, directory: str) -> list[PendingUpload]:
        prefix = directory.rstrip("/") + "/"  # 'out/dataset1/' never matches 'out/dataset10'
        with _LOCK:
            return [PendingUpload(u.path, u.upload_id, u.initiated)
                    for u in _PENDING.values() if u.path.startswith(prefix)]


class MemoryMultipartStore(MemoryStore):
    """``memmp://`` URLs: memory files, S3's multipart uploads, no rename declared."""

    capabilities = MEMMP_CAPABILITIES
    default_committer = "memmp-magic"

    def __init__(self, url: str, config: Config | None = None) -> None:
        super().__init__(url, config)
        self._uploads = MemoryMultipartUploads(
            self, self.config.get_int(MIN_PART_SIZE_KEY, S3_MIN_PART_SIZE, minimum=1),
            self.config.get_int(PART_SIZE_KEY, 16 * 1024**2, minimum=1))

    def url(self, path: str) -> str:
        return f"memmp://{path}"

    def strip(self, url: str) -> str:
        if url.startswith("memmp://"):
            url = url[len("memmp://"):]
        return super().strip(url)

    def implementation(self, capability: str) -> object:
        """The multipart uploads are their own object; exclusive create is this store's."""
        return self._uploads if capability == caps.MULTIPART_DELAYED_COMPLETION else self

    # Directories exist only as the prefixes of files, as on S3: the memory filesystem's
    # directories that outlive their files would show a deleted job's state as leftovers.
    def info(self, path: str) -> FileInfo | None:
        with _LOCK:
            found = super().info(path)
            return None if found is not None and found.is_dir and not self._children(
                found.path.rstrip("/")) else found

    def list_dir(self, path: str) -> list[FileInfo]:
        with _LOCK:
            return [i for i in super().list_dir(path)
                    if not i.is_dir or self._children(i.path.rstrip("/"))]


