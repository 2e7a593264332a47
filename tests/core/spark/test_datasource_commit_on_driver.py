"""The driver side of the data source: which attempts' output a job publishes.

Spark's commit coordinator chooses an attempt only after the Python task returned its
message, so every attempt that finished writing may have produced output. These tests
drive ``OutcommitWriter.commit`` with the messages Spark would pass (the accepted
attempts only) after two attempts of one task both wrote, as a speculative copy does.
No session is needed: the driver-side calls run as in Spark's driver process.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql.types import LongType, StructField, StructType

import outcommit
import outcommit.engine.tasks
from outcommit.spark.datasource import OutcommitCommitMessage, OutcommitWriter
from outcommit.spark.options import build_plan
from outcommit.testing.conformance import leftovers, visible_files


def write_attempt(writer: OutcommitWriter, index: int, attempt: int) -> OutcommitCommitMessage:
    """What ``write()`` does for a committer without task-commit.isolated: write, no commit."""
    committer, job = writer._committer()
    assert not outcommit.engine.tasks.commits_on_executor(committer)
    task = job.task_attempt(index, attempt)
    committer.setup_task(task)
    name = f"part-{index:05d}-000-{job.job_id}-a{attempt}.txt"
    committer.filesystem(task).pipe_file(f"{committer.work_path(task)}/{name}", f"a{attempt}".encode())
    return OutcommitCommitMessage(task_index=index, attempt=attempt, task_message=None,
                                  commit_on_driver=True, rows=1, files=1, bytes=2, paths=[name])


@pytest.mark.parametrize("committer", ["v1", "v2"])
def test_only_the_accepted_attempt_is_published(tmp_path: Path, committer: str) -> None:
    dest = f"file://{tmp_path}/out"
    plan = build_plan({"path": dest, "committer": committer}, overwrite=False)
    writer = OutcommitWriter(plan, StructType([StructField("id", LongType())]))
    other = write_attempt(writer, 0, 0)      # the first attempt finished writing...
    accepted = write_attempt(writer, 0, 1)   # ...and so did its speculative copy
    # Nothing is visible before the driver commits: not even v2 published anything yet.
    store = outcommit.open_store(dest)
    assert visible_files(store, store.strip(dest)) == {}
    writer.commit([accepted])                # Spark accepted attempt 1 only
    assert visible_files(store, store.strip(dest)) == {accepted.paths[0]: b"a1"}
    assert other.paths[0] not in visible_files(store, store.strip(dest))
    assert leftovers(store, store.strip(dest)) == []
    report = outcommit.load_success(store, f"{store.strip(dest)}/_SUCCESS")
    assert [f.rsplit("/", 1)[1] for f in report.filenames] == accepted.paths
