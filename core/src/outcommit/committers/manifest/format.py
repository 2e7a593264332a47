"""The task manifest: JSON with the field names and type marker of Hadoop's TaskManifest.

A manifest lists the files a committed task attempt wrote (source in the attempt's
directory, destination in the job's destination, size, etag) and the directories they
need. It travels as the task's commit message and is saved in the job attempt directory.

Loading validates everything a job commit will act on, because a manifest is data from
the store: a truncated or tampered file must fail with an error naming the file and the
field, and must never make the job commit move or overwrite anything outside the job's
destination or take a source from outside the job's own temporary directory.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ...errors import CorruptFileError
from ...paths import is_inside
from ...success import SUCCESS_FILE

MANIFEST_TYPE = "org.apache.hadoop.mapreduce.lib.output.committer.manifest.files.TaskManifest/1"
MANIFEST_VERSION = 1
MANIFEST_SUFFIX = "-manifest.json"
#: Hadoop's DirEntry type for "unknown, probe at job commit".
DIR_TYPE_UNKNOWN = 0


@dataclass(frozen=True)
class FileEntry:
    """One file to rename at job commit (Hadoop: ``s``, ``d``, ``z``, ``e``)."""

    source: str
    dest: str
    size: int
    etag: str | None = None

    def to_dict(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"s": self.source, "d": self.dest, "z": self.size}
        if self.etag:
            entry["e"] = self.etag
        return entry


@dataclass(frozen=True)
class DirEntry:
    """A destination directory the job commit creates if absent (``d``, ``t``, ``l``)."""

    dir: str
    level: int
    type: int = DIR_TYPE_UNKNOWN

    def to_dict(self) -> dict[str, Any]:
        return {"d": self.dir, "t": self.type, "l": self.level}


@dataclass
class TaskManifest:
    """What one committed task attempt hands to the job commit.

    Paths are URLs of the destination's store, as in Hadoop's manifests.
    """

    job_id: str
    job_attempt: int
    task_id: str
    task_attempt_id: str
    task_attempt_dir: str
    files: list[FileEntry] = field(default_factory=list)
    directories: list[DirEntry] = field(default_factory=list)
    iostatistics: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files)

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": MANIFEST_TYPE,
            "version": MANIFEST_VERSION,
            "jobId": self.job_id,
            "jobAttemptNumber": self.job_attempt,
            "taskID": self.task_id,
            "taskAttemptID": self.task_attempt_id,
            "taskAttemptDir": self.task_attempt_dir,
            "files": [f.to_dict() for f in self.files],
            "directories": [d.to_dict() for d in self.directories],
            "iostatistics": dict(self.iostatistics),
            "extraData": dict(self.extra),
        }

    @classmethod
    def from_dict(cls, data: Any, where: str) -> TaskManifest:
        """Check the shape and types; containment is checked by :func:`check_manifest`."""
        if not isinstance(data, Mapping):
            raise CorruptFileError(where, None, "is not a JSON object")
        if data.get("type") != MANIFEST_TYPE:
            raise CorruptFileError(where, "type",
                                   f"expected {MANIFEST_TYPE!r}, found {data.get('type')!r}")
        version = _field(data, "version", int, where)
        if version != MANIFEST_VERSION:
            raise CorruptFileError(where, "version", f"unsupported version {version}")
        files = [_file_entry(e, i, where) for i, e in enumerate(_field(data, "files", list, where))]
        dirs = [_dir_entry(e, i, where)
                for i, e in enumerate(_field(data, "directories", list, where))]
        stats = data.get("iostatistics") or {}
        extra = data.get("extraData") or {}
        if not isinstance(stats, Mapping) or not isinstance(extra, Mapping):
            raise CorruptFileError(where, "iostatistics/extraData", "must be JSON objects")
        return cls(job_id=_field(data, "jobId", str, where),
                   job_attempt=_field(data, "jobAttemptNumber", int, where),
                   task_id=_field(data, "taskID", str, where),
                   task_attempt_id=_field(data, "taskAttemptID", str, where),
                   task_attempt_dir=_field(data, "taskAttemptDir", str, where),
                   files=files, directories=dirs, iostatistics=dict(stats),
                   extra={str(k): str(v) for k, v in extra.items()})


def _field(data: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    if key not in data:
        raise CorruptFileError(where, key, "is missing")
    value = data[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise CorruptFileError(where, key, f"must be {kind.__name__}, found {type(value).__name__}")
    return value


def _file_entry(entry: Any, index: int, where: str) -> FileEntry:
    name = f"files[{index}]"
    if not isinstance(entry, Mapping):
        raise CorruptFileError(where, name, "is not a JSON object")
    source, dest, size = entry.get("s"), entry.get("d"), entry.get("z")
    if not isinstance(source, str) or not source:
        raise CorruptFileError(where, f"{name}.s", "source is missing")
    if not isinstance(dest, str) or not dest:
        raise CorruptFileError(where, f"{name}.d", "destination is missing")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise CorruptFileError(where, f"{name}.z", f"size must be a non-negative integer, found {size!r}")
    etag = entry.get("e")
    if etag is not None and not isinstance(etag, str):
        raise CorruptFileError(where, f"{name}.e", "etag must be a string")
    return FileEntry(source, dest, size, etag or None)


def _dir_entry(entry: Any, index: int, where: str) -> DirEntry:
    name = f"directories[{index}]"
    if not isinstance(entry, Mapping) or not isinstance(entry.get("d"), str):
        raise CorruptFileError(where, name, "must be an object with a directory 'd'")
    level, kind = entry.get("l", 0), entry.get("t", DIR_TYPE_UNKNOWN)
    if not isinstance(level, int) or not isinstance(kind, int):
        raise CorruptFileError(where, name, "'l' and 't' must be integers")
    return DirEntry(entry["d"], level, kind)


@dataclass(frozen=True)
class CheckedFile:
    """A manifest file entry resolved to store paths and proven to be contained.

    ``size`` and ``etag`` are the manifest's claim until job commit has listed the source
    (``stages.observe_sources``): from then on they are what the store reported.
    """

    source: str
    dest: str
    size: int
    etag: str | None
    task_id: str
    #: The manifest (or message) and entry it came from, for errors naming the field.
    where: str = ""
    index: int = 0


def check_manifest(manifest: TaskManifest, where: str, *, job_id: str, job_dir: str,
                   dest: str, strip: Callable[[str], str],
                   attempt_dir_of: Callable[[str, int], str]) -> list[CheckedFile]:
    """Prove a manifest belongs to this job and stays inside its areas; resolve its paths.

    ``job_dir`` is the job's temporary directory, ``dest`` the destination (store paths);
    ``attempt_dir_of(task_attempt_id, job_attempt)`` is where that attempt wrote.
    """
    if manifest.job_id != job_id:
        raise CorruptFileError(where, "jobId", f"belongs to job {manifest.job_id!r}, not {job_id}")
    if not manifest.task_attempt_id.startswith(f"attempt_{job_id}_"):
        raise CorruptFileError(where, "taskAttemptID",
                               f"{manifest.task_attempt_id!r} is not an attempt of job {job_id}")
    if not manifest.task_id.startswith(f"task_{job_id}_"):
        raise CorruptFileError(where, "taskID", f"{manifest.task_id!r} is not a task of job {job_id}")
    # attempt_<job>_<jobAttempt>_<task index>_<attempt>: a manifest naming another task's
    # attempt (say, one that never committed) would make that attempt's output visible.
    numbers = manifest.task_attempt_id[len(f"attempt_{job_id}_"):].split("_")
    if (len(numbers) != 3 or not all(n.isdigit() for n in numbers)
            or numbers[1] != manifest.task_id[len(f"task_{job_id}_"):]
            or int(numbers[0]) != manifest.job_attempt):
        raise CorruptFileError(where, "taskAttemptID",
                               f"{manifest.task_attempt_id!r} is not an attempt of task "
                               f"{manifest.task_id} in job attempt {manifest.job_attempt}")
    attempt_dir = attempt_dir_of(manifest.task_attempt_id, manifest.job_attempt)
    if not is_inside(attempt_dir, job_dir):
        raise CorruptFileError(where, "taskAttemptID", "names a directory outside the job")
    temporary = posixpath.join(dest, "_temporary")
    success_marker = posixpath.join(dest, SUCCESS_FILE)
    checked: list[CheckedFile] = []
    seen: set[str] = set()
    for index, entry in enumerate(manifest.files):
        source, target = strip(entry.source), strip(entry.dest)
        # A tampered source could pull in another job's (or any) file.
        if not is_inside(source, attempt_dir):
            raise CorruptFileError(where, f"files[{index}].s",
                                   f"source {entry.source} is not inside this task attempt's "
                                   "directory of this job")
        # A tampered destination could overwrite anything the credentials reach.
        if not is_inside(target, dest) or target == temporary or is_inside(target, temporary):
            raise CorruptFileError(where, f"files[{index}].d",
                                   f"destination {entry.dest} is not inside the job's destination")
        # _SUCCESS is the committer's: the job's summary would overwrite (lose) the file, or
        # the file would pass for a summary.
        if target == success_marker:
            raise CorruptFileError(where, f"files[{index}].d",
                                   f"destination {entry.dest} is reserved for the job's "
                                   f"{SUCCESS_FILE} summary")
        if target in seen:
            raise CorruptFileError(where, f"files[{index}].d",
                                   f"destination {entry.dest} appears twice")
        seen.add(target)
        checked.append(CheckedFile(source, target, entry.size, entry.etag, manifest.task_id,
                                   where, index))
    for index, directory in enumerate(manifest.directories):
        path = strip(directory.dir)
        if path != dest and not is_inside(path, dest):
            raise CorruptFileError(where, f"directories[{index}].d",
                                   f"directory {directory.dir} is not inside the job's destination")
    return checked
