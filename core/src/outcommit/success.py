"""The ``_SUCCESS`` report: JSON with the field names of Hadoop's SuccessData.

Hadoop's tooling reads it; a zero-byte ``_SUCCESS`` is never written by outcommit.
"""

from __future__ import annotations

import heapq
import socket
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import CorruptFileError
from .redaction import scrub, scrub_values

SUCCESS_NAME = "org.apache.hadoop.fs.s3a.commit.files.SuccessData/1"
SUCCESS_FILE = "_SUCCESS"
MAX_FILENAMES = 100


@dataclass
class SuccessData:
    committer: str
    jobId: str
    jobIdSource: str = ""
    description: str = ""
    success: bool = True
    filenames: list[str] = field(default_factory=list)
    metrics: dict[str, int] = field(default_factory=dict)
    diagnostics: dict[str, str] = field(default_factory=dict)
    hostname: str = field(default_factory=socket.gethostname)
    timestamp: int = field(default_factory=lambda: int(time.time() * 1000))
    date: str = ""
    name: str = SUCCESS_NAME
    #: Hadoop's IOStatisticsSnapshot: counters, gauges, minimums, maximums, meanstatistics.
    iostatistics: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.date:
            self.date = time.strftime("%a %b %d %H:%M:%S %Z %Y", time.localtime(self.timestamp / 1000))

    @classmethod
    def build(cls, *, committer: str, job_id: str, job_id_source: str, files: Iterable[str],
              metrics: Mapping[str, int] | None = None,
              diagnostics: Mapping[str, str] | None = None, success: bool = True,
              description: str = "", iostatistics: Mapping[str, Any] | None = None) -> SuccessData:
        """A report listing the first 100 of ``files`` (in order); the total goes in the metrics.

        ``files`` is read once, as it comes: a job of 100k files never has their names in a list.
        """
        count = 0

        def counted() -> Iterator[str]:
            nonlocal count
            for name in files:
                count += 1
                yield name

        first = heapq.nsmallest(MAX_FILENAMES, counted())
        all_metrics = {"files.committed": count, **(metrics or {})}
        return cls(committer=committer, jobId=job_id, jobIdSource=job_id_source,
                   description=description, success=success, filenames=first,
                   metrics={k: int(v) for k, v in all_metrics.items()},
                   diagnostics={k: str(v) for k, v in (diagnostics or {}).items()},
                   iostatistics=dict(iostatistics or {}))

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "timestamp": self.timestamp,
            "date": self.date,
            "hostname": self.hostname,
            "committer": self.committer,
            # Free text that may quote an error or a setting: never a secret (redaction.py).
            "description": scrub(self.description),
            "jobId": self.jobId,
            "jobIdSource": self.jobIdSource,
            "metrics": dict(self.metrics),
            "diagnostics": scrub_values(self.diagnostics),
            "filenames": list(self.filenames),
            "success": self.success,
            "iostatistics": self.iostatistics or {"counters": {}, "gauges": {}, "minimums": {},
                                                  "maximums": {}, "meanstatistics": {}},
        }

    @classmethod
    def from_dict(cls, data: Any, path: str = SUCCESS_FILE) -> SuccessData:
        """Validate and load; a corrupt report raises CorruptFileError naming the field."""
        if not isinstance(data, dict):
            raise CorruptFileError(path, None, "is not a JSON object (a zero-byte or legacy _SUCCESS?)")
        if data.get("name") != SUCCESS_NAME:
            raise CorruptFileError(path, "name", f"expected {SUCCESS_NAME!r}, found {data.get('name')!r}")
        checks: list[tuple[str, type | tuple[type, ...]]] = [
            ("committer", str), ("jobId", str), ("success", bool), ("timestamp", int),
            ("filenames", list), ("metrics", dict), ("diagnostics", dict),
        ]
        for key, kind in checks:
            if key not in data:
                raise CorruptFileError(path, key, "is missing")
            value = data[key]
            if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
                raise CorruptFileError(path, key, f"has type {type(value).__name__}")
        if not all(isinstance(f, str) for f in data["filenames"]):
            raise CorruptFileError(path, "filenames", "must be a list of strings")
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in data["metrics"].values()):
            raise CorruptFileError(path, "metrics", "values must be integers")
        iostatistics = data.get("iostatistics") or {}
        if not isinstance(iostatistics, dict) or not all(
                isinstance(iostatistics.get(k, {}), dict) for k in ("counters", "minimums", "maximums")):
            raise CorruptFileError(path, "iostatistics", "must be Hadoop's IOStatisticsSnapshot object")
        return cls(committer=data["committer"], jobId=data["jobId"],
                   jobIdSource=str(data.get("jobIdSource", "")),
                   description=str(data.get("description", "")), success=data["success"],
                   filenames=list(data["filenames"]), metrics=dict(data["metrics"]),
                   diagnostics={k: str(v) for k, v in data["diagnostics"].items()},
                   hostname=str(data.get("hostname", "")), timestamp=data["timestamp"],
                   date=str(data.get("date", "")), iostatistics=iostatistics)


def load_success(store: Any, path: str) -> SuccessData:
    """Read and validate a ``_SUCCESS`` file from a store."""
    return SuccessData.from_dict(store.load_json(path), store.url(path))
