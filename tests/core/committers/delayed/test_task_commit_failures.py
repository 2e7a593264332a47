"""A delayed committer's task commit that fails leaves nothing another attempt or the job
commit would trip on.

A task's claim (job commit by discovery, ``claims.py``) never exists without the
pendingset it names.

A claim takes the task from every other attempt: if it could land while its attempt's
pendingset did not (sent side by side, as one commit briefly did to save a round trip),
a job commit by discovery would choose an attempt with nothing published and commit none
of the task's files, silently. Found by review of that commit: there the second test failed
every time (``task 0's output silently dropped``), the first whenever its claim landed
before the kill; both pass with the pendingset first.

A failed task commit aborts the attempt's uploads: nothing it published may stay to be
committed, and a repeat of that attempt's commit must not publish them again (found by
review: the repeat was accepted, and the job commit then failed on uploads that no longer
existed, NoSuchUpload).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

import outcommit
from outcommit import JobContext, read
from outcommit.errors import InjectedFault, TaskCommitError
from outcommit.testing.faults import Fault, FaultInjectingStore


class Killed(BaseException):
    """The attempt's process dies: its pendingset request never lands."""


def attempt(committer: Any, job: JobContext, n: int, files: dict[str, bytes]) -> Any:
    task = job.task_attempt(0, n)
    committer.setup_task(task)
    fs, base = committer.filesystem(task), committer.work_path(task)
    for name, data in files.items():
        fs.pipe_file(f"{base}/{name}", data)
    return task


def setup(faults: list[Fault]) -> tuple[str, Any, Any, JobContext]:
    """A destination on memmp://, a committer whose store fails as ``faults`` say (the
    attempt that fails) and a healthy one (the driver and the attempt that succeeds)."""
    url = f"memmp:///claims-{uuid.uuid4().hex[:8]}/out/dataset1"
    faulty = FaultInjectingStore(outcommit.open_store(url), faults)
    failing = outcommit.create_committer(url, {}, "memmp-magic", store=faulty)
    driver = outcommit.create_committer(url, {}, "memmp-magic")
    job = JobContext(url, config=driver.config)  # discovery: no task messages
    driver.setup_job(job)
    return url, failing, driver, job


def test_an_attempt_killed_in_its_task_commit_leaves_no_claim_over_its_duplicate() -> None:
    """A1 dies as its pendingset is created; A2 (a speculative duplicate) commits; the job
    commit by discovery commits A2's file."""
    url, failing, driver, job = setup(
        [Fault("create_exclusive", path_contains=".pendingset", error=lambda _: Killed())])
    a1 = attempt(failing, job, 0, {"part-0.txt": b"data"})
    with pytest.raises(Killed):
        failing.commit_task(a1)
    a2 = attempt(driver, job, 1, {"part-0.txt": b"data"})
    driver.commit_task(a2)
    driver.commit_job(job)
    assert read.committed_files(url), "task 0's output silently dropped"


def test_a_failed_task_commit_whose_cleanup_fails_leaves_no_claim_over_its_retry() -> None:
    """A1's pendingset create fails, and any delete of a claim would fail too; the driver
    aborts A1 and its retry A2 commits: the job commit commits A2's file."""
    url, failing, driver, job = setup(
        [Fault("create_exclusive", path_contains=".pendingset"),
         Fault("delete", path_contains="_claim")])
    a1 = attempt(failing, job, 0, {"part-0.txt": b"data"})
    with pytest.raises(InjectedFault):
        failing.commit_task(a1)
    driver.abort_task(a1)
    a2 = attempt(driver, job, 1, {"part-0.txt": b"data"})
    driver.commit_task(a2)
    driver.commit_job(job)
    assert read.committed_files(url), "task 0's output silently dropped"


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
