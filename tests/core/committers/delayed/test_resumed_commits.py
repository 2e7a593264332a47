"""Which job commits check their files before ``_SUCCESS`` names them (``jobcommit.verify``).

A commit of the job that began before this call may have completed uploads whose objects
were deleted since (an abort that began, another job's ``replace``), and completing such an
upload again may answer success without making the object (S3 can; emulated here around
the in-memory multipart store, which answers NoSuchUpload). Such a call checks every file
against its upload's etag. A call whose completions are all its own checks nothing.
"""

from __future__ import annotations

from typing import Any

import pytest

import outcommit
from outcommit.context import JobContext
from outcommit.factory import create_committer, open_store
from outcommit.success import SUCCESS_FILE
from outcommit.testing.conformance import CommitterConformance
from outcommit.testing.faults import Fault, FaultInjectingStore


def _task(committer: Any, job: JobContext, index: int, files: dict[str, bytes]) -> Any:
    task = job.task_attempt(index)
    committer.setup_task(task)
    CommitterConformance.write(committer, task, files)
    return committer.commit_task(task)


def _repeated_completions_succeed(committer: Any) -> None:
    real = committer.mp.complete

    def repeated_completion_succeeds(path, upload_id, etags, if_none_match=False):  # type: ignore[no-untyped-def]
        try:
            return real(path, upload_id, etags, if_none_match)
        except Exception:
            return "answered-as-done"
    committer.mp.complete = repeated_completion_succeeds


@pytest.fixture
def dest(memmp_root: str) -> str:
    return memmp_root + "/table"


def test_a_retried_commit_whose_job_did_not_end_checks_its_files(dest: str) -> None:
    """Call 1 completes both uploads, but ending the job (its markers' delete) fails: the
    job stays live, no ``_SUCCESS``. Another job's ``replace`` deletes both objects. Call 2
    of the same attempt is not a resume of an ended job, but its commit record was there
    before it: it checks, and refuses (it named two missing objects in ``_SUCCESS``)."""
    store = open_store(dest, {})
    failing_end = FaultInjectingStore(store, [Fault("delete", path_contains="_job", times=-1)])
    committer = create_committer(dest, {}, store=failing_end)
    job = JobContext(dest, config=committer.config)
    committer.setup_job(job)
    messages = [_task(committer, job, i, {f"f{i}.txt": b"x%d" % i}) for i in range(2)]
    with pytest.raises(outcommit.CommitError):
        committer.commit_job(job, messages)
    root = store.strip(dest)
    assert store.exists(root + "/f0.txt") and not store.exists(root + "/" + SUCCESS_FILE)
    replacing = create_committer(dest, {"outcommit.committer.conflict-mode": "replace"})
    other = JobContext(dest, config=replacing.config)
    replacing.setup_job(other)
    replacing.commit_job(other, [_task(replacing, other, 0, {"other.txt": b"o"})])
    assert not store.exists(root + "/f0.txt")
    again = create_committer(dest, {})
    _repeated_completions_succeed(again)
    with pytest.raises(outcommit.CommitError, match="not in the destination as this job made them"):
        again.commit_job(job, messages)
    assert outcommit.load_success(store, root + "/" + SUCCESS_FILE).jobId == other.job_id
    again.abort_job(job)
    again.cleanup_job(job)


def test_a_later_attempt_whose_predecessor_never_began_its_commit_checks_nothing(dest: str) -> None:
    """Attempt 0 committed its tasks and died before its job commit: attempt 1 recovers
    them and completes every upload itself. No file is checked (one look for attempt 0's
    commit record, one for an abort note), where a check per file would cost a request
    each (and could not prove a file on a store whose etags are not MD5s, S3 Express)."""
    committer = create_committer(dest, {})
    job = JobContext(dest, config=committer.config)
    committer.setup_job(job)
    for i in range(5):
        _task(committer, job, i, {f"f{i}.txt": b"x"})
    later = job.next_attempt()
    store = FaultInjectingStore(open_store(dest, {}), [])
    again = create_committer(dest, {}, store=store)
    again.setup_job(later)
    for i in range(5):
        assert again.recover_task(later.task_attempt(i))
    checked: list[str] = []
    real_holds = again.mp.holds

    def holds(path: str, upload_id: str, etags: Any) -> bool:
        checked.append(path)
        return bool(real_holds(path, upload_id, etags))
    again.mp.holds = holds
    assert again.commit_job(later).success
    assert store.calls["multipart.complete"] == 5 and checked == [], (store.calls, checked)
