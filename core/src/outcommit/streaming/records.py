"""What the batch log's files hold: a committed batch's entry, a job's record, a decision.

Their own module because the sink, the settling of a restarted query, the readers of a
destination and the ``_spark_metadata`` copy all use them, while only
:class:`~outcommit.streaming.log.BatchLog` knows where they live and how they are created.
Parsing refuses what the sink could not have written: a file path outside the
destination, a job id that is not one path segment, a decision other than the two.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import CorruptFileError

BATCH_FORMAT = "outcommit.streaming.Batch/1"
COMPACT_FORMAT = "outcommit.streaming.Compact/1"
JOB_FORMAT = "outcommit.streaming.Job/1"
DECISION_FORMAT = "outcommit.streaming.Decision/1"
QUERY_FORMAT = "outcommit.streaming.Query/1"
#: The two decisions on a job: its own driver commits it, or a rollback aborts it.
COMMIT, ABORT = "commit", "abort"
#: What ``outcommit.context`` accepts as a job id (a path segment).
_JOB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


@dataclass(frozen=True)
class CommittedFile:
    """One file of a committed batch: its path relative to the destination."""

    path: str
    size: int
    rows: int

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "size": self.size, "rows": self.rows}

    @classmethod
    def from_dict(cls, data: Any, where: str) -> CommittedFile:
        if not isinstance(data, Mapping):
            raise CorruptFileError(where, "files", "an entry is not an object")
        path = data.get("path")
        if not isinstance(path, str) or not path or path.startswith("/") or \
                any(p in ("", ".", "..") for p in path.split("/")):
            # A log must never point a reader (or a rollback) outside the destination.
            raise CorruptFileError(where, "files.path",
                                   f"not a relative path inside the destination: {path!r}")
        size, rows = data.get("size"), data.get("rows")
        if not isinstance(size, int) or not isinstance(rows, int) or size < 0 or rows < 0:
            raise CorruptFileError(where, "files", f"size/rows of {path} are not counts")
        return cls(path, size, rows)


@dataclass(frozen=True)
class BatchEntry:
    """A committed micro-batch."""

    batch_id: int
    query_id: str
    job_id: str | None
    committer: str
    files: tuple[CommittedFile, ...]
    committed_at: float
    metrics: Mapping[str, int] = field(default_factory=dict)

    @property
    def rows(self) -> int:
        return sum(f.rows for f in self.files)

    @property
    def bytes(self) -> int:
        return sum(f.size for f in self.files)

    def to_dict(self) -> dict[str, Any]:
        return {"format": BATCH_FORMAT, "batchId": self.batch_id, "queryId": self.query_id,
                "jobId": self.job_id, "committer": self.committer,
                "committedAt": self.committed_at, "rows": self.rows, "bytes": self.bytes,
                "files": [f.to_dict() for f in self.files], "metrics": dict(self.metrics)}

    @classmethod
    def from_dict(cls, data: Any, where: str) -> BatchEntry:
        if not isinstance(data, Mapping) or data.get("format") != BATCH_FORMAT:
            raise CorruptFileError(where, "format", f"not a batch log entry ({BATCH_FORMAT})")
        batch_id, files = data.get("batchId"), data.get("files")
        if not isinstance(batch_id, int) or isinstance(batch_id, bool) or batch_id < 0:
            raise CorruptFileError(where, "batchId", "not a batch id")
        if not isinstance(files, list):
            raise CorruptFileError(where, "files", "not a list")
        for key in ("jobId", "queryId", "committer"):
            value = data.get(key)
            if value is not None and not isinstance(value, str):
                raise CorruptFileError(where, key, f"not a string: {value!r}")
        job_id = data.get("jobId")
        committed_at = data.get("committedAt")
        if committed_at is not None and (not isinstance(committed_at, (int, float))
                                         or isinstance(committed_at, bool)):
            raise CorruptFileError(where, "committedAt", f"not a time: {committed_at!r}")
        metrics = data.get("metrics")
        if metrics is not None and not isinstance(metrics, Mapping):
            raise CorruptFileError(where, "metrics", "not an object")
        return cls(batch_id=batch_id, query_id=data.get("queryId") or "",
                   job_id=job_id or None, committer=data.get("committer") or "",
                   files=tuple(CommittedFile.from_dict(f, where) for f in files),
                   committed_at=float(committed_at or 0.0),
                   metrics={str(k): v for k, v in (metrics or {}).items()
                            if isinstance(v, int) and not isinstance(v, bool)})


@dataclass(frozen=True)
class JobRecord:
    """A job started for one batch by one run of a query; ``files`` once its commit began."""

    job_id: str
    batch_id: int
    query_id: str
    run_id: str
    committer: str
    files: tuple[CommittedFile, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"format": JOB_FORMAT, "jobId": self.job_id, "batchId": self.batch_id,
                                "queryId": self.query_id, "runId": self.run_id,
                                "committer": self.committer}
        if self.files is not None:
            data["files"] = [f.to_dict() for f in self.files]
        return data

    @classmethod
    def from_dict(cls, data: Any, where: str) -> JobRecord:
        if not isinstance(data, Mapping) or data.get("format") != JOB_FORMAT:
            raise CorruptFileError(where, "format", f"not a streaming job record ({JOB_FORMAT})")
        job_id, batch_id, files = data.get("jobId"), data.get("batchId"), data.get("files")
        # The job id becomes a path segment (its work areas, its record): refuse anything
        # that is not an id the sink could have made.
        if not isinstance(job_id, str) or not _JOB_ID.match(job_id) or job_id in (".", ".."):
            raise CorruptFileError(where, "jobId", f"not a job id: {job_id!r}")
        if not isinstance(batch_id, int) or isinstance(batch_id, bool) or batch_id < 0:
            raise CorruptFileError(where, "batchId", f"not a batch id: {batch_id!r}")
        if files is not None and not isinstance(files, list):
            raise CorruptFileError(where, "files", "not a list")
        text = {}
        for key in ("queryId", "runId", "committer"):
            value = data.get(key)
            if value is not None and not isinstance(value, str):
                raise CorruptFileError(where, key, f"not a string: {value!r}")
            text[key] = value or ""
        return cls(job_id=job_id, batch_id=batch_id, query_id=text["queryId"], run_id=text["runId"],
                   committer=text["committer"],
                   files=None if files is None else tuple(CommittedFile.from_dict(f, where) for f in files))


@dataclass(frozen=True)
class Decision:
    """Whether job ``job_id`` commits (its driver decided) or is rolled back (a rollback did)."""

    job_id: str
    batch_id: int
    outcome: str
    by: str = ""
    decided_at: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"format": DECISION_FORMAT, "jobId": self.job_id, "batchId": self.batch_id,
                "decision": self.outcome, "by": self.by, "decidedAt": self.decided_at}

    @classmethod
    def from_dict(cls, data: Any, where: str) -> Decision:
        if not isinstance(data, Mapping) or data.get("format") != DECISION_FORMAT:
            raise CorruptFileError(where, "format", f"not a job decision ({DECISION_FORMAT})")
        job_id, batch_id, outcome = data.get("jobId"), data.get("batchId"), data.get("decision")
        if not isinstance(job_id, str) or not _JOB_ID.match(job_id):
            raise CorruptFileError(where, "jobId", f"not a job id: {job_id!r}")
        if not isinstance(batch_id, int) or isinstance(batch_id, bool) or batch_id < 0:
            raise CorruptFileError(where, "batchId", f"not a batch id: {batch_id!r}")
        if outcome not in (COMMIT, ABORT):
            raise CorruptFileError(where, "decision", f"{outcome!r}, expected {COMMIT!r} or {ABORT!r}")
        by, decided_at = data.get("by"), data.get("decidedAt")
        return cls(job_id, batch_id, outcome, by if isinstance(by, str) else "",
                   float(decided_at) if isinstance(decided_at, (int, float)) else 0.0)


def entry_for(batch_id: int, query_id: str, job_id: str | None, committer: str,
              files: Iterable[CommittedFile], metrics: Mapping[str, int] | None = None) -> BatchEntry:
    return BatchEntry(batch_id, query_id, job_id, committer,
                      tuple(sorted(files, key=lambda f: f.path)), time.time(), dict(metrics or {}))
