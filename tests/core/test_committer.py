"""The base committer's shared helpers: the job's own _SUCCESS, the commit point."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import outcommit
from outcommit import JobContext
from outcommit.errors import DestinationExistsError
from outcommit.recovery import AbortPreview
from outcommit.success import SUCCESS_FILE
from outcommit.testing.conformance import visible_files
from outcommit.testing.faults import Fault, FaultInjectingStore


@pytest.fixture
def dest(tmp_path: Path) -> str:
    return f"file://{tmp_path}/out"


def commit(dest: str, committer: str = "v1", store: Any = None, **config: str) -> tuple[Any, JobContext]:
    c = outcommit.create_committer(dest, dict(config), committer, store=store)
    job = JobContext(dest, config=c.config)
    c.setup_job(job)
    task = job.task_attempt(0)
    c.setup_task(task)
    fs, base = c.filesystem(task), c.work_path(task)
    fs.pipe_file(f"{base}/part-0.txt", b"data")
    c.commit_job(job, [c.commit_task(task)])
    return c, job


def _interrupted(dest: str, name: str = "v1") -> tuple[Any, JobContext]:
    """A one-file job whose commit published its file and failed writing _SUCCESS."""
    inner = outcommit.open_store(dest)
    no_success = FaultInjectingStore(inner, [Fault("save_json", path_contains=SUCCESS_FILE, times=-1)])
    with pytest.raises(outcommit.JobCommitError):
        commit(dest, name, store=no_success)
    (job_id,) = outcommit.create_committer(dest, {}, name).recovery.state.leftover_jobs()
    return inner, JobContext(dest, job_id=job_id)


def test_own_success_is_only_this_jobs_successful_report(dest: str) -> None:
    committer, job = commit(dest)
    store = committer.store
    path = store.join(store.strip(dest), SUCCESS_FILE)
    assert committer.reports.own_success(job).jobId == job.job_id
    assert committer.reports.own_success(JobContext(dest)) is None  # another job's
    report = store.load_json(path)
    store.save_json(path, {**report, "success": False})
    assert committer.reports.own_success(job) is None  # a failed commit's report
    store.write_bytes(path, b"not json")
    assert committer.reports.own_success(job) is None  # corrupt: no evidence
    store.delete(path)
    assert committer.reports.own_success(job) is None


def test_own_success_is_none_where_success_is_disabled(dest: str) -> None:
    committer, job = commit(dest)
    off = outcommit.create_committer(dest, {"outcommit.success.enabled": "false"}, "v1")
    assert committer.reports.own_success(job) is not None and off.reports.own_success(job) is None


@pytest.mark.parametrize("name", ["v1", "v2", "manifest"])
def test_a_success_write_that_took_effect_then_failed_commits_the_job(dest: str, name: str) -> None:
    """The response of the _SUCCESS PUT is lost after the store wrote it: the commit point
    is passed, so job commit reports success (an engine would otherwise retry it)."""
    inner = outcommit.open_store(dest)
    store = FaultInjectingStore(inner, [Fault("save_json", path_contains=SUCCESS_FILE, when="after")])
    committer, job = commit(dest, name, store=store)
    assert store.faults[0].fired == 1
    assert committer.reports.own_success(job) is not None
    assert visible_files(inner, inner.strip(dest)) == {"part-0.txt": b"data"}


def test_a_success_write_that_failed_fails_the_commit(dest: str) -> None:
    inner = outcommit.open_store(dest)
    store = FaultInjectingStore(inner, [Fault("save_json", path_contains=SUCCESS_FILE, when="before")])
    with pytest.raises(outcommit.JobCommitError):
        commit(dest, "v1", store=store)


def test_a_later_attempt_under_fail_meets_its_own_committed_output(dest: str) -> None:
    """v2 keeps no journal: only the job's _SUCCESS tells its own output from others'."""
    _, job = commit(dest, "v2", **{"outcommit.committer.conflict-mode": "fail"})
    again = outcommit.create_committer(dest, {"outcommit.committer.conflict-mode": "fail"}, "v2")
    again.setup_job(job.next_attempt())
    with pytest.raises(DestinationExistsError):
        again.setup_job(JobContext(dest))  # another job still meets data


@pytest.mark.parametrize("name", ["v1", "manifest"])
def test_an_abort_that_cannot_read_success_keeps_the_jobs_state(dest: str, name: str) -> None:
    """Abort after a commit began must know whether it finished (its _SUCCESS): when that
    read fails, neither the output nor the evidence of it may go (cleanup_job after it
    neither); the next abort, which can read, removes both."""
    inner, job = _interrupted(dest, name)
    unreadable = FaultInjectingStore(inner, [Fault("load_json", path_contains=SUCCESS_FILE, times=-1,
                                                   error=OSError)])
    first = outcommit.create_committer(dest, {}, name, store=unreadable)
    job_id = job.job_id
    first.abort_job(job)
    first.cleanup_job(job)
    assert unreadable.faults[0].fired >= 1
    assert visible_files(inner, inner.strip(dest)) == {"part-0.txt": b"data"}
    assert list(first.recovery.state.leftover_jobs()) == [job_id]
    second = outcommit.create_committer(dest, {}, name)
    second.abort_job(job)
    second.cleanup_job(job)
    assert visible_files(inner, inner.strip(dest)) == {}
    assert second.recovery.state.leftover_jobs() == {}


def test_cleanup_of_a_job_an_engine_committed_deletes_its_state(dest: str) -> None:
    """Where the engine's own record is the commit point (a streaming batch log, no
    _SUCCESS), ``cleanup_committed_job`` deletes what ``cleanup_job`` keeps as evidence."""
    inner, job = _interrupted(dest)
    committer = outcommit.create_committer(dest, {}, "v1")
    job_id = job.job_id
    committer.cleanup_job(job)
    assert list(committer.recovery.state.leftover_jobs()) == [job_id]
    committer.recovery.state.cleanup_committed_job(job)
    assert committer.recovery.state.leftover_jobs() == {}
    assert visible_files(inner, inner.strip(dest)) == {"part-0.txt": b"data"}


def test_a_later_attempt_set_up_after_a_kept_abort_is_live(dest: str) -> None:
    """An abort kept the job's state (and its note); then a new attempt of the job was set
    up. The job is live again: 'outcommit jobs abort' must not take it for the kept abort."""
    from outcommit.testing.faults import failing_deletes_in

    inner, job = _interrupted(dest)
    refusing = FaultInjectingStore(inner, failing_deletes_in(inner.strip(dest)))
    first = outcommit.create_committer(dest, {}, "v1", store=refusing)
    job_id = job.job_id
    first.abort_job(job)
    assert first.recovery.job_status(job_id, [0]) == "abort-kept"
    later = job.next_attempt()
    again = outcommit.create_committer(dest, {}, "v1")
    again.setup_job(later)
    assert again.recovery.job_status(job_id, again.recovery.state.leftover_jobs()[job_id]) == "live"


class _Killed(BaseException):
    """The process dies here: no handler of the committer's failure paths catches it."""


@pytest.mark.parametrize("name", ["v1", "manifest"])
def test_an_abort_killed_midway_is_never_resumed_as_a_commit(dest: str, name: str) -> None:
    """A job commit was interrupted (no _SUCCESS); its abort died after deleting one of
    the files that commit published. A later commit_job of the job must not resume the
    commit: it would write a _SUCCESS for output the abort already took apart. The job
    says 'abort-kept', and aborting again removes everything."""
    inner, job = _interrupted(dest, name)
    dying = FaultInjectingStore(inner, [Fault("delete", path_contains="part-0.txt", when="after",
                                              error=_Killed)])
    first = outcommit.create_committer(dest, {}, name, store=dying)
    job_id = job.job_id
    with pytest.raises(_Killed):
        first.abort_job(job)
    again = outcommit.create_committer(dest, {}, name)
    with pytest.raises(outcommit.JobCommitError, match=r"is not active|was aborted"):
        again.commit_job(job)
    assert again.reports.own_success(job) is None
    assert again.recovery.job_status(job_id, [0]) == "abort-kept"  # its markers went before the rollback
    again.abort_job(job)
    again.cleanup_job(job)
    assert visible_files(inner, inner.strip(dest)) == {}
    assert again.recovery.state.leftover_jobs() == {}


@pytest.mark.parametrize("name", ["v1", "manifest"])
def test_an_abort_that_keeps_the_state_is_reported_once(dest: str, name: str,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    """An engine calls abort_job, then cleanup_job: when the abort kept the job's state,
    its error says so once; the cleanup after it does not say it again."""
    inner, job = _interrupted(dest, name)
    unreadable = FaultInjectingStore(inner, [Fault("load_json", path_contains=SUCCESS_FILE, times=-1,
                                                   error=OSError)])
    committer = outcommit.create_committer(dest, {}, name, store=unreadable)
    job_id = job.job_id
    caplog.clear()
    with caplog.at_level("INFO", logger="outcommit"):
        committer.abort_job(job)
        committer.cleanup_job(job)
    errors = [r for r in caplog.records if r.levelname == "ERROR" and "was not undone" in r.getMessage()]
    assert len(errors) == 1, [r.getMessage() for r in errors]
    assert list(committer.recovery.state.leftover_jobs()) == [job_id]


def _two_files_interrupted(dest: str, name: str) -> tuple[Any, JobContext]:
    """A two-task job whose commit published both files and died before _SUCCESS."""
    inner = outcommit.open_store(dest)
    no_success = FaultInjectingStore(inner, [Fault("save_json", path_contains=SUCCESS_FILE, times=-1)])
    c = outcommit.create_committer(dest, {}, name, store=no_success)
    job = JobContext(dest, config=c.config)
    c.setup_job(job)
    messages = []
    for index in range(2):
        task = job.task_attempt(index)
        c.setup_task(task)
        c.filesystem(task).pipe_file(f"{c.work_path(task)}/part-{index}.txt", b"data%d" % index)
        messages.append(c.commit_task(task))
    with pytest.raises(outcommit.JobCommitError):
        c.commit_job(job, messages)
    assert set(visible_files(inner, inner.strip(dest))) == {"part-0.txt", "part-1.txt"}
    return inner, job


@pytest.mark.parametrize("name", ["v1", "manifest"])
def test_a_later_attempt_never_reports_files_a_killed_abort_removed(dest: str, name: str) -> None:
    """The abort of an interrupted commit died after removing one of its two files; a new
    job attempt then recovers the tasks and commits. Resuming the journal would list the
    removed file in a success=true _SUCCESS: the commit must fail instead."""
    inner, job = _two_files_interrupted(dest, name)
    dying = FaultInjectingStore(inner, [Fault("delete", path_contains="part-0.txt", when="after",
                                              error=_Killed)])
    with pytest.raises(_Killed):
        outcommit.create_committer(dest, {}, name, store=dying).abort_job(job)
    later = job.next_attempt()
    again = outcommit.create_committer(dest, {}, name)
    again.setup_job(later)
    for index in range(2):
        again.recover_task(later.task_attempt(index))
    with pytest.raises(outcommit.JobCommitError):
        again.commit_job(later)
    assert again.reports.own_success(later) is None
    again.abort_job(later)
    again.cleanup_job(later)
    assert visible_files(inner, inner.strip(dest)) == {}
    assert again.recovery.state.leftover_jobs() == {}


def _v1_job(committer: Any, dest: str,
            files_per_task: list[dict[str, bytes]]) -> tuple[JobContext, list[Any]]:
    job = JobContext(dest, config=committer.config)
    committer.setup_job(job)
    messages = [_v1_task(committer, job.task_attempt(index), files)
                for index, files in enumerate(files_per_task)]
    return job, messages


def _v1_task(committer: Any, task: Any, files: dict[str, bytes]) -> Any:
    committer.setup_task(task)
    for name, data in files.items():
        committer.filesystem(task).pipe_file(f"{committer.work_path(task)}/{name}", data)
    return committer.commit_task(task)


def test_a_later_attempt_never_reports_a_file_an_earlier_attempt_left_unmoved(dest: str) -> None:
    """Attempt 0 published task 0's file and died before task 1's; its abort died after
    deleting task 0's. Attempt 1 reruns both tasks, task 1 under another name: the journal's
    part-1 still waits in attempt 0's directory, but nothing moves it. A _SUCCESS naming it
    would name a file that is not there."""
    inner = outcommit.open_store(dest)
    dying = FaultInjectingStore(inner, [Fault("rename_file", path_contains="part-1", error=_Killed,
                                              times=-1)])
    first = outcommit.create_committer(dest, {}, "v1", store=dying)
    job, messages = _v1_job(first, dest, [{"part-0": b"0"}, {"part-1": b"1"}])
    with pytest.raises(_Killed):
        first.commit_job(job, messages)
    killer = FaultInjectingStore(inner, [Fault("delete", path_contains="out/part-0", when="after",
                                               error=_Killed)])
    with pytest.raises(_Killed):
        outcommit.create_committer(dest, {}, "v1", store=killer).abort_job(job)
    later = job.next_attempt()
    again = outcommit.create_committer(dest, {}, "v1")
    again.setup_job(later)
    rerun = [_v1_task(again, later.task_attempt(0), {"part-0": b"0"}),
             _v1_task(again, later.task_attempt(1), {"part-1b": b"1"})]
    with pytest.raises(outcommit.JobCommitError, match="gone or replaced"):
        again.commit_job(later, rerun)
    assert again.reports.own_success(later) is None


def test_a_later_attempt_never_takes_anothers_file_for_one_a_killed_abort_removed(dest: str) -> None:
    """A killed abort deleted part-0; another writer then put its own part-0 there. A later
    attempt resuming the journal must not report that file as the job's."""
    inner = outcommit.open_store(dest)
    no_success = FaultInjectingStore(inner, [Fault("save_json", path_contains=SUCCESS_FILE, times=-1)])
    first = outcommit.create_committer(dest, {}, "v1", store=no_success)
    job, messages = _v1_job(first, dest, [{"part-0": b"0000"}, {"part-1": b"1"}])
    with pytest.raises(outcommit.JobCommitError):
        first.commit_job(job, messages)
    killer = FaultInjectingStore(inner, [Fault("delete", path_contains="out/part-0", when="after",
                                               error=_Killed)])
    with pytest.raises(_Killed):
        outcommit.create_committer(dest, {}, "v1", store=killer).abort_job(job)
    inner.write_bytes(inner.join(inner.strip(dest), "part-0"), b"someone else's")
    later = job.next_attempt()
    again = outcommit.create_committer(dest, {}, "v1")
    again.setup_job(later)
    for index in range(2):
        again.recover_task(later.task_attempt(index))
    with pytest.raises(outcommit.JobCommitError, match="gone or replaced"):
        again.commit_job(later)
    assert inner.read_bytes(inner.join(inner.strip(dest), "part-0")) == b"someone else's"


@pytest.mark.parametrize("name", ["v1", "manifest"])
def test_an_abort_killed_before_it_ended_the_job_still_stops_a_resume(dest: str, name: str) -> None:
    """The abort wrote its note and died before deleting the job's markers: the job still
    looks live, but the interrupted commit must not be resumed (the note refuses it)."""
    inner, job = _interrupted(dest, name)
    committer = outcommit.create_committer(dest, {}, name)
    job_id = job.job_id
    killer = FaultInjectingStore(inner, [Fault("delete", path_contains="_job.json", error=_Killed)])
    with pytest.raises(_Killed):
        outcommit.create_committer(dest, {}, name, store=killer).abort_job(job)
    assert committer.recovery.job_status(job_id, [0]) == "live"
    with pytest.raises(outcommit.JobCommitError, match="was aborted"):
        committer.commit_job(job)
    assert committer.reports.own_success(job) is None
    committer.abort_job(job)
    committer.cleanup_job(job)
    assert visible_files(inner, inner.strip(dest)) == {} and committer.recovery.state.leftover_jobs() == {}


def test_a_resume_checks_each_journaled_file_once(dest: str) -> None:
    """A resumed commit reports every journaled file, so it checks each is still there as
    published, abort or not (another job's ``replace`` may have deleted them:
    tests/core/stateful/test_batch_regressions.py): one ``info`` per file of the 40, and the
    one a resume makes without files."""
    inner = outcommit.open_store(dest)
    no_success = FaultInjectingStore(inner, [Fault("save_json", path_contains=SUCCESS_FILE)])
    first = outcommit.create_committer(dest, {}, "v1", store=no_success)
    job, messages = _v1_job(first, dest, [{f"f{i}": b"x"} for i in range(40)])
    with pytest.raises(outcommit.JobCommitError):
        first.commit_job(job, messages)
    counted = FaultInjectingStore(inner)
    again = outcommit.create_committer(dest, {}, "v1", store=counted)
    assert again.commit_job(job, messages).success
    assert counted.calls["info"] == 40 + 1, counted.calls
    assert len(visible_files(inner, inner.strip(dest))) == 40


def test_a_resume_of_two_tasks_files_at_one_name_checks_the_one_that_won(dest: str) -> None:
    """v1's merge lets the last of two tasks' files at one name win, as Hadoop's does; the
    journal names both. A resume checks the one that won: it refused the job, the other's
    size not matching (an adversarial review of the check on every resume)."""
    inner = outcommit.open_store(dest)
    no_success = FaultInjectingStore(inner, [Fault("save_json", path_contains=SUCCESS_FILE)])
    first = outcommit.create_committer(dest, {}, "v1", store=no_success)
    job, messages = _v1_job(first, dest, [{"same": b"0"}, {"same": b"11"}])
    with pytest.raises(outcommit.JobCommitError):
        first.commit_job(job, messages)
    again = outcommit.create_committer(dest, {}, "v1")
    assert again.commit_job(job, messages).success
    assert len(visible_files(inner, inner.strip(dest))) == 1


class _Stateless(outcommit.Committer):
    """A third-party committer made from ``Committer`` directly: it keeps no job state."""

    name = "stateless"

    def __init__(self, destination: str, store: Any) -> None:
        super().__init__(destination, store)
        self.cleaned: list[str] = []

    def cleanup_job(self, job: JobContext) -> None:
        self.cleaned.append(job.job_id)


def test_a_committer_that_keeps_no_job_state_answers_recovery_as_the_base_did(dest: str) -> None:
    """Its recovery reads no state (NoJobState): no leftover jobs, an unknown status, no
    owner, nothing an abort would remove, nothing written or deleted; its committed job's
    cleanup is its cleanup_job."""
    store = outcommit.open_store(dest)
    committer = _Stateless(dest, store)
    job, recovery = JobContext(dest), committer.recovery
    assert recovery.state.leftover_jobs() == {} and recovery.state.job_evidence(job) is None
    assert recovery.job_status(job.job_id, [0]) == "unknown" and recovery.job_owner(job.job_id) is None
    assert recovery.abort_preview(job) == AbortPreview([], [], [])
    assert not recovery.aborted(job) and not recovery.abort_began_any_attempt(job)
    recovery.begin_abort(job)
    recovery.delete_foreign_state(job.job_id)
    assert not store.exists(store.strip(dest))
    recovery.state.cleanup_committed_job(job)
    assert committer.cleaned == [job.job_id]
