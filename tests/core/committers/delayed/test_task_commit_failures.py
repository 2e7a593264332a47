"""A delayed committer's task commit that fails aborts the attempt's uploads: nothing it
published may stay to be committed, and a repeat of that attempt's commit must not publish
them again (found by review: the repeat was accepted, and the job commit then failed on
uploads that no longer existed, NoSuchUpload)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

import outcommit
from outcommit import JobContext, read
from outcommit.errors import InjectedFault, TaskCommitError
from outcommit.testing.faults import Fault, FaultInjectingStore


def attempt(committer: Any, job: JobContext, n: int, files: dict[str, bytes]) -> Any:
    task = job.task_attempt(0, n)
    committer.setup_task(task)
    fs, base = committer.filesystem(task), committer.work_path(task)
    for name, data in files.items():
        fs.pipe_file(f"{base}/{name}", data)
    return task


def test_a_pendingset_whose_answer_was_lost_is_withdrawn_and_the_attempt_not_committed_again() -> None:
    """The pendingset lands, its answer is lost: the failed commit aborts the uploads and
    withdraws the pendingset naming them; a repeat of the same attempt's commit is refused;
    another attempt commits and the job commit (by discovery) commits its file."""
    url = f"memmp:///lost-{uuid.uuid4().hex[:8]}/out/dataset1"
    faulty = FaultInjectingStore(outcommit.open_store(url),
                                 [Fault("create_exclusive", path_contains=".pendingset", when="after")])
    failing = outcommit.create_committer(url, {}, "memmp-magic", store=faulty)
    driver = outcommit.create_committer(url, {}, "memmp-magic")
    job = JobContext(url, config=driver.config)  # discovery: no task messages
    driver.setup_job(job)
    a1 = attempt(failing, job, 0, {"part-0.txt": b"first"})
    with pytest.raises(InjectedFault):
        failing.commit_task(a1)
    layout = driver.layout(job)
    assert not driver.meta.exists(layout.pendingset(job, a1.task_id, a1.attempt_id))
    with pytest.raises(TaskCommitError, match="failed and aborted its uploads"):
        failing.commit_task(a1)
    a2 = attempt(driver, job, 1, {"part-0.txt": b"second"})
    driver.commit_task(a2)
    driver.commit_job(job)
    assert read.committed_files(url)
