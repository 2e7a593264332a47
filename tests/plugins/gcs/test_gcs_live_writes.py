"""What the check after each file costs on GCS: one request per file (a read of the job's
marker), counted by the store's own request tracing (outcommit_gcs.tracing).

A HEAD-style ``info`` of the marker would cost gcsfs an object request and, often, a
listing too; the check reads the marker instead (``abandon_write_if_job_ended``).
"""

from __future__ import annotations

import posixpath
from typing import Any

import pytest

from outcommit import JobContext, create_committer

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
