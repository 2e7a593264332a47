"""What the check after each file costs on GCS: one request per file (a read of the job's
marker), counted by the store's own request tracing (outcommit_gcs.tracing).

A HEAD-style ``info`` of the marker would cost gcsfs an object request and, often, a
listing too; the check reads the marker instead (``abandon_write_if_job_ended``).
"""

from __future__ import annotations

import gc
import posixpath
from typing import Any

import pytest

from outcommit import JobContext, create_committer, open_store
from outcommit.testing.suite import leftovers

pytestmark = pytest.mark.gcs

FILES = 5


def test_each_file_a_task_writes_costs_one_request_more_than_the_plain_write(
        gcs_root: str, gcs_config: dict[str, Any]) -> None:
    committer = create_committer(gcs_root, gcs_config, "manifest")
    job = JobContext(gcs_root, config=gcs_config)
    committer.setup_job(job)
    task = job.task_attempt(0, 0)
    committer.setup_task(task)
    base = committer.work_path(task)

    def requests_of(fs: Any, name: str) -> int:
        before = sum(committer.store.iostatistics.snapshot()["counters"].values())
        for i in range(FILES):
            with fs.open(posixpath.join(base, f"{name}-{i}.txt"), "wb") as f:
                f.write(b"x" * 1000)
        return sum(committer.store.iostatistics.snapshot()["counters"].values()) - before

    plain = requests_of(committer.store.fs, "plain")
    checked = requests_of(committer.filesystem(task), "checked")
    assert checked - plain == FILES, (plain, checked)
    committer.abort_job(job)
    committer.cleanup_job(job)


def test_a_file_dropped_unclosed_after_job_cleanup_leaves_nothing(
        gcs_root: str, gcs_config: dict[str, Any]) -> None:
    """gcsfs uploads a file garbage-collected unclosed (its finalizer defers the close):
    dropped by a failing attempt after the job's cleanup, it stayed, unchecked."""
    committer = create_committer(gcs_root, gcs_config, "manifest")
    job = JobContext(gcs_root, config=gcs_config)
    committer.setup_job(job)
    task = job.task_attempt(0)
    committer.setup_task(task)
    stream = committer.filesystem(task).open(posixpath.join(committer.work_path(task), "part-0.txt"), "wb")
    stream.write(b"written by a failing attempt\n")
    committer.abort_job(job)
    committer.cleanup_job(job)
    del stream
    gc.collect()
    store = open_store(gcs_root, gcs_config)
    assert leftovers(store, store.strip(gcs_root)) == []
