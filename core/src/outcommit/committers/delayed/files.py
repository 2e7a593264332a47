"""``.pending`` (one upload) and ``.pendingset`` (one task's uploads) files.

Field names are Hadoop's (SinglePendingCommit / PendingSet), so Hadoop's tooling can
read them. Everything loaded is validated before a single upload is completed or
aborted: a file on the store is input, and a tampered one must not make a job write,
complete or abort anything outside its destination.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from outcommit.errors import ContainmentError, CorruptFileError
from outcommit.paths import hidden_from_readers, relative_to

PENDING_SUFFIX = ".pending"
PENDINGSET_SUFFIX = ".pendingset"
VERSION = 2
MAX_FILE_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class PendingCommit:
    """One uploaded-but-not-completed object."""

    bucket: str
    key: str
    upload_id: str
    etags: tuple[str, ...]
    length: int
    job_id: str
    task_id: str = ""
    uri: str = ""
    filename: str = ""
    created: int = 0
    #: Scheme of the ``uri`` written when none is given: the binding's (S3's writes
    #: ``s3a``, as Hadoop's S3A; none: no ``uri`` is written, readers use bucket and key).
    scheme: str = ""

    @property
    def path(self) -> str:
        """Store path of the destination object."""
        return f"{self.bucket}/{self.key}"

    def to_dict(self) -> dict[str, Any]:
        now = int(time.time() * 1000)
        return {
            "version": VERSION,
            "filename": self.filename,
            "uri": self.uri or (f"{self.scheme}://{self.bucket}/{self.key}" if self.scheme else ""),
            "bucket": self.bucket,
            "destinationKey": self.key,
            "uploadId": self.upload_id,
            "created": self.created or now,
            "saved": now,
            "date": time.strftime("%a %b %d %H:%M:%S %Z %Y"),
            "jobId": self.job_id,
            "taskId": self.task_id,
            "text": "",
            "etags": list(self.etags),
            "length": self.length,
            "extraData": {},
        }


@dataclass
class PendingSet:
    """The uploads one task attempt committed."""

    job_id: str
    task_id: str
    attempt_id: str
    commits: list[PendingCommit] = field(default_factory=list)
    committer: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": VERSION,
            "jobId": self.job_id,
            "taskId": self.task_id,
            "taskAttemptId": self.attempt_id,
            "committer": self.committer,
            "commits": [c.to_dict() for c in self.commits],
            "extraData": {},
        }

    def to_bytes(self) -> bytes:
        return json.dumps(self.to_dict(), indent=1).encode("utf-8")

    @property
    def length(self) -> int:
        return sum(c.length for c in self.commits)


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Expectations:
    """What every loaded file must agree with: the job and its destination."""

    job_id: str
    destination: str            # store path, e.g. bucket/table
    reserved: tuple[str, ...]   # prefixes of top-level names inside the destination no commit may target
    #: Schemes a pending file's ``uri`` may name (the binding's: the store's, and Hadoop's
    #: spellings of it); none: a ``uri`` names a store no binding of this job writes.
    uri_schemes: tuple[str, ...] = ()
    #: The store's limits: parts per object, bytes per part and per object.
    max_parts: int = 10_000
    max_part_size: int = 5 * 1024**3
    max_object_size: int = 5 * 1024**4


def _field(data: Mapping[str, Any], name: str, kind: type, where: str, prefix: str = "") -> Any:
    if name not in data:
        raise CorruptFileError(where, prefix + name, "is missing")
    value = data[name]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise CorruptFileError(where, prefix + name,
                               f"must be {kind.__name__}, found {type(value).__name__}")
    return value


def parse_commit(data: Any, where: str, expect: Expectations, prefix: str = "") -> PendingCommit:
    """Validate one commit entry (a ``.pending`` file or one element of ``commits``)."""
    if not isinstance(data, Mapping):
        raise CorruptFileError(where, prefix.rstrip(".") or None, "is not a JSON object")
    version = data.get("version", VERSION)
    if version != VERSION:
        raise CorruptFileError(where, prefix + "version", f"unsupported version {version!r}")
    bucket = _field(data, "bucket", str, where, prefix)
    key = _field(data, "destinationKey", str, where, prefix)
    upload_id = _field(data, "uploadId", str, where, prefix)
    etags = _field(data, "etags", list, where, prefix)
    length = _field(data, "length", int, where, prefix)
    job_id = _field(data, "jobId", str, where, prefix)
    if not upload_id.strip():
        raise CorruptFileError(where, prefix + "uploadId", "is empty")
    if not 1 <= len(etags) <= expect.max_parts:
        raise CorruptFileError(where, prefix + "etags",
                               f"has {len(etags)} parts; part numbers must be 1..{expect.max_parts}")
    if not all(isinstance(e, str) and e.strip('"') for e in etags):
        raise CorruptFileError(where, prefix + "etags", "every part etag must be a non-empty string")
    if length < 0:
        raise CorruptFileError(where, prefix + "length", f"is negative ({length})")
    if length > len(etags) * expect.max_part_size or length > expect.max_object_size:
        # Only a tampered file says more than its parts can hold; it would reach metrics.
        raise CorruptFileError(where, prefix + "length",
                               f"{length} bytes cannot be held by {len(etags)} part(s) of at most "
                               f"{expect.max_part_size} bytes (objects: at most {expect.max_object_size})")
    if job_id != expect.job_id:
        raise CorruptFileError(where, prefix + "jobId",
                               f"belongs to job {job_id!r}, not {expect.job_id!r}")
    _check_target(data, bucket, key, where, expect, prefix)
    created = data.get("created") or 0
    if not isinstance(created, int) or isinstance(created, bool):
        raise CorruptFileError(where, prefix + "created", f"must be int, found {type(created).__name__}")
    return commit_of(data)


def commit_of(data: Mapping[str, Any]) -> PendingCommit:
    """The commit an entry names, unchecked: :func:`parse_commit`'s, once it validated the
    entry, and job commit's acting passes', which read again the very bytes its first pass
    validated (held in memory): checking them again cost ~5 us a file a pass (issue 30)."""
    return PendingCommit(bucket=data["bucket"], key=data["destinationKey"], upload_id=data["uploadId"],
                         etags=tuple(e.strip('"') for e in data["etags"]), length=data["length"],
                         job_id=data["jobId"], task_id=str(data.get("taskId", "")), uri=data.get("uri", ""),
                         filename=str(data.get("filename", "")), created=data.get("created") or 0)


def _check_target(data: Mapping[str, Any], bucket: str, key: str, where: str, expect: Expectations,
                  prefix: str) -> str:
    """Containment of one entry's target: the job's bucket, inside the destination, not reserved.

    Returns the entry's uri (validated against bucket/destinationKey when present).
    """
    dest_bucket = expect.destination.partition("/")[0]
    if bucket != dest_bucket:
        raise CorruptFileError(where, prefix + "bucket",
                               f"names bucket {bucket!r}; the job writes to bucket {dest_bucket!r}")
    uri = data.get("uri", "")
    if not isinstance(uri, str):
        raise CorruptFileError(where, prefix + "uri", f"must be str, found {type(uri).__name__}")
    # A uri naming another store or object than bucket/destinationKey is a tampered entry.
    scheme, sep, rest = uri.partition("://")
    if uri and (not sep or scheme not in expect.uri_schemes or rest != f"{bucket}/{key}"):
        raise CorruptFileError(where, prefix + "uri", f"{uri!r} disagrees with bucket/destinationKey")
    try:
        relative = relative_to(f"{bucket}/{key}", expect.destination)
    except ContainmentError:
        raise CorruptFileError(where, prefix + "destinationKey",
                               f"{key!r} is outside the job's destination {expect.destination}") from None
    if is_reserved_target(relative, expect.reserved):
        raise CorruptFileError(where, prefix + "destinationKey",
                               f"{key!r} targets a committer's own area {relative.split('/', 1)[0]!r}")
    return uri


def is_reserved_target(relative: str, reserved: Iterable[str]) -> bool:
    """Whether a file at ``relative`` (to the destination) would land on ``_SUCCESS`` or in
    a committer's own area: any magic or staging job directory, this job's or another's
    (its state, never data), or a ``reserved`` top-level name."""
    top = relative.split("/", 1)[0]
    return (relative == "_SUCCESS" or any(p.startswith("__magic") for p in relative.split("/"))
            or any(top.startswith(r) for r in reserved))


def parse_pendingset(data: Any, where: str, expect: Expectations) -> PendingSet:
    """Validate a whole ``.pendingset`` (or a task commit message carrying one)."""
    if not isinstance(data, Mapping):
        raise CorruptFileError(where, None, "is not a JSON object")
    version = data.get("version")
    if version != VERSION:
        raise CorruptFileError(where, "version", f"unsupported version {version!r} (expected {VERSION})")
    job_id = _field(data, "jobId", str, where)
    if job_id != expect.job_id:
        raise CorruptFileError(where, "jobId", f"belongs to job {job_id!r}, not {expect.job_id!r}")
    task_id = _field(data, "taskId", str, where)
    commits_data = _field(data, "commits", list, where)
    commits = [parse_commit(c, where, expect, f"commits[{i}].") for i, c in enumerate(commits_data)]
    check_unique(commits, where)
    return PendingSet(job_id=job_id, task_id=task_id, attempt_id=str(data.get("taskAttemptId", "")),
                      commits=commits, committer=str(data.get("committer", "")))


def check_unique(commits: Iterable[PendingCommit], where: str) -> None:
    """Two uploads to one key: one would silently replace the other."""
    seen: dict[str, str] = {}
    for commit in commits:
        if commit.path in seen:
            raise CorruptFileError(where, "destinationKey",
                                   f"{commit.key!r} is the destination of two uploads "
                                   f"({seen[commit.path]} and {commit.upload_id})")
        seen[commit.path] = commit.upload_id


def salvage_commits(data: Any, expect: Expectations, raw: bytes | None = None) -> list[PendingCommit]:
    """Every contained upload a corrupt file still identifies (so an abort can abort it).

    Aborting needs only bucket, destinationKey and uploadId: an entry with broken etags,
    length, version or jobId is still aborted, but never one whose target is outside the
    destination. ``raw`` (the file's bytes) is scanned when ``data`` is not valid JSON.
    """
    if data is None and raw is not None:
        return _scan_raw(raw, expect)
    entries = data.get("commits") if isinstance(data, Mapping) else None
    if entries is None and isinstance(data, Mapping):
        entries = [data]  # a single .pending
    found = []
    for entry in entries if isinstance(entries, list) else []:
        commit = _abortable(entry, expect)
        if commit is not None:
            found.append(commit)
    return found


def _abortable(entry: Any, expect: Expectations) -> PendingCommit | None:
    if not isinstance(entry, Mapping):
        return None
    bucket, key, upload_id = entry.get("bucket"), entry.get("destinationKey"), entry.get("uploadId")
    if not (isinstance(bucket, str) and isinstance(key, str) and isinstance(upload_id, str)
            and upload_id.strip()):
        return None
    try:
        _check_target({}, bucket, key, "salvage", expect, "")
    except CorruptFileError:
        return None
    etags = entry.get("etags")
    good = isinstance(etags, list) and bool(etags) and all(isinstance(e, str) and e for e in etags)
    parts = tuple(str(e).strip('"') for e in etags) if good and isinstance(etags, list) else ()
    return PendingCommit(bucket=bucket, key=key, upload_id=upload_id, etags=parts, length=0,
                         job_id=expect.job_id)


# One commit entry as this module writes it: bucket, destinationKey, uploadId in that order.
_ENTRY = re.compile(r'"bucket"\s*:\s*("(?:[^"\\]|\\.)*")\s*,\s*'
                    r'"destinationKey"\s*:\s*("(?:[^"\\]|\\.)*")\s*,\s*'
                    r'"uploadId"\s*:\s*("(?:[^"\\]|\\.)*")')


def _scan_raw(raw: bytes, expect: Expectations) -> list[PendingCommit]:
    """Entries of a file that is no longer valid JSON (truncated, edited), found by pattern."""
    found = []
    for match in _ENTRY.finditer(raw.decode("utf-8", errors="replace")):
        try:
            bucket, key, upload_id = (json.loads(g) for g in match.groups())
        except ValueError:
            continue
        commit = _abortable({"bucket": bucket, "destinationKey": key, "uploadId": upload_id}, expect)
        if commit is not None:
            found.append(commit)
    return found


def is_hidden_path(relative: str) -> bool:
    """Not data to readers (Spark's rule: ``_src=a/`` is a partition, ``_temporary`` not)."""
    return hidden_from_readers(relative)
