"""Engines' writers on the magic filesystem (moto S3): a failed attempt leaves no noise behind."""

from __future__ import annotations

import gc
import sys
from typing import Any

import pyarrow as pa
import pytest
from s3_helpers import start

from outcommit.engine.local import FailurePoint, LocalDriver
from outcommit.engine.writer import StreamingWriter
from outcommit.testing.conformance import leftovers

pytestmark = pytest.mark.s3


@pytest.fixture
def unraisable(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What Python reports as ``Exception ignored in: ...`` (``sys.unraisablehook``: an
    exception in ``__del__``) while the test runs."""
    seen: list[str] = []

    def hook(u: Any) -> None:
        seen.append(f"{u.exc_type.__name__}: {u.exc_value} in {u.object!r}")

    monkeypatch.setattr(sys, "unraisablehook", hook)
    return seen


def tables(tasks: int = 3, rows: int = 30) -> list[pa.Table]:
    return [pa.table({"id": pa.array(range(t * rows, (t + 1) * rows), pa.int64()),
                      "day": [f"2026-11-0{1 + i % 3}" for i in range(rows)]}) for t in range(tasks)]


def test_a_retried_magic_task_prints_no_traceback(s3_config: dict[str, Any], s3_root: str,
                                                  unraisable: list[str]) -> None:
    """Issue 27: every retried magic task of the local engine printed 'Exception ignored in:
    ParquetWriter.__del__ ... File not in write mode', though the retry was correct: the
    failed attempt threw its upload streams away, and pyarrow's writers, still open,
    closed themselves into them when they were collected."""
    url = f"{s3_root}/retried"
    result = LocalDriver(url, committer="magic", config=s3_config, partition_by=["day"],
                         max_rows_per_file=7,
                         failures=[FailurePoint(task=1, attempt=0, point="mid-write", after_files=2)]
                         ).run(tables())
    gc.collect()
    assert result.attempts == {0: 1, 1: 2, 2: 1}
    assert result.rows == 90
    assert unraisable == []


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_a_failed_write_closes_its_format_writers(s3_config: dict[str, Any], s3_root: str,
                                                  fmt: str, unraisable: list[str]) -> None:
    """The same at the writer: the attempt's source fails with files open in two partitions."""
    url = f"{s3_root}/failed-{fmt}"
    committer, job = start(url, s3_config)
    task = job.task_attempt(0, 0)
    committer.setup_task(task)

    def failing() -> Any:
        yield from tables(1)[0].to_batches()
        raise RuntimeError("the source failed")

    def attempt() -> None:
        writer = StreamingWriter(committer.filesystem(task), committer.work_path(task), 0,
                                 job.job_id, 0, fmt, ["day"])
        with pytest.raises(RuntimeError, match="source failed"):
            writer.write_batches(failing())
        assert writer._open == {}

    attempt()
    gc.collect()
    assert unraisable == []
    committer.abort_task(task)
    committer.abort_job(job)
    store = committer.store
    assert leftovers(store, store.strip(url)) == []
