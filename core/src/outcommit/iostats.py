"""I/O statistics in Hadoop's shape, so ``_SUCCESS`` reads in Hadoop's tooling too.

Hadoop's ``IOStatisticsSnapshot`` (what ``ManifestPrinter`` and ``SuccessData`` carry)
is JSON with ``counters``, ``gauges``, ``minimums``, ``maximums`` and
``meanstatistics``. A duration statistic ``name`` appears as the counter ``name`` (how
many), ``name.failures``, and ``name.min``/``name.max``/``name.mean`` in milliseconds.
Names are Hadoop's where one exists (``committer_commits_completed``,
``object_put_request``, ``object_list_request``...).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

# Hadoop's names (org.apache.hadoop.fs.s3a.Statistic, StoreStatisticNames).
COMMITS_COMPLETED = "committer_commits_completed"
COMMITS_ABORTED = "committer_commits_aborted"
BYTES_COMMITTED = "committer_bytes_committed"
TASKS_COMPLETED = "committer_tasks_completed"
JOBS_COMPLETED = "committer_jobs_completed"
COMMIT_JOB = "committer_commit_job"
OP_RENAME = "op_rename"
FILES_COPIED_BYTES = "files_copied_bytes"
THROTTLED = "store_io_throttled"

#: S3 API operations by the Hadoop statistic that counts them.
S3_OPERATIONS: dict[str, str] = {
    "PutObject": "object_put_request",
    "UploadPart": "multipart_upload_part_put",
    "CreateMultipartUpload": "object_multipart_initiated",
    "CompleteMultipartUpload": "multipart_upload_completed",
    "AbortMultipartUpload": "object_multipart_aborted",
    "ListObjectsV2": "object_list_request",
    "ListMultipartUploads": "multipart_upload_list",
    "ListParts": "multipart_upload_list_parts",
    "HeadObject": "object_metadata_request",
    "HeadBucket": "store_exists_probe",
    "GetObject": "action_http_get_request",
    "DeleteObject": "object_delete_request",
    "DeleteObjects": "object_bulk_delete_request",
    "CopyObject": "object_copy_requests",
}
PUT_BYTES = "object_put_bytes"


class IOStatistics:
    """Thread-safe counters and durations, snapshot in Hadoop's JSON shape."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counters: dict[str, int] = {}
        self._durations: dict[str, list[float]] = {}  # name -> [samples, sum, min, max]

    def add(self, name: str, amount: int = 1) -> None:
        with self._lock:
            self._counters[name] = self._counters.get(name, 0) + amount

    def duration(self, name: str, millis: float, failed: bool = False) -> None:
        with self._lock:
            self._counters[name] = self._counters.get(name, 0) + 1
            if failed:
                key = f"{name}.failures"
                self._counters[key] = self._counters.get(key, 0) + 1
            stats = self._durations.setdefault(name, [0, 0.0, millis, millis])
            stats[0] += 1
            stats[1] += millis
            stats[2] = min(stats[2], millis)
            stats[3] = max(stats[3], millis)

    @contextmanager
    def track(self, name: str) -> Iterator[None]:
        """Time the block as a duration statistic (a failure is counted as such)."""
        started = time.monotonic()
        failed = True
        try:
            yield
            failed = False
        finally:
            self.duration(name, (time.monotonic() - started) * 1000, failed)

    def merge(self, other: IOStatistics) -> None:
        snapshot = other.snapshot()
        for name, value in snapshot["counters"].items():
            self.add(name, value)

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            counters = dict(sorted(self._counters.items()))
            durations = {k: list(v) for k, v in self._durations.items()}
        return {
            "counters": counters,
            "gauges": {},
            "minimums": {f"{k}.min": int(v[2]) for k, v in sorted(durations.items())},
            "maximums": {f"{k}.max": int(v[3]) for k, v in sorted(durations.items())},
            "meanstatistics": {f"{k}.mean": {"samples": int(v[0]), "sum": int(v[1])}
                               for k, v in sorted(durations.items())},
        }


def merge_snapshots(*snapshots: Mapping[str, Any]) -> dict[str, Any]:
    """One snapshot of several: counters add up, extremes are kept, means combine."""
    merged: dict[str, Any] = {"counters": {}, "gauges": {}, "minimums": {}, "maximums": {},
                              "meanstatistics": {}}
    for snap in snapshots:
        for name, value in snap.get("counters", {}).items():
            merged["counters"][name] = merged["counters"].get(name, 0) + int(value)
        for name, value in snap.get("minimums", {}).items():
            merged["minimums"][name] = min(merged["minimums"].get(name, value), value)
        for name, value in snap.get("maximums", {}).items():
            merged["maximums"][name] = max(merged["maximums"].get(name, value), value)
        for name, mean in snap.get("meanstatistics", {}).items():
            current = merged["meanstatistics"].setdefault(name, {"samples": 0, "sum": 0})
            current["samples"] += int(mean.get("samples", 0))
            current["sum"] += int(mean.get("sum", 0))
    for section in merged.values():
        ordered = dict(sorted(section.items()))
        section.clear()
        section.update(ordered)
    return merged
