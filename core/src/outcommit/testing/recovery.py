"""Conformance scenarios after a failure: a job whose state outlived its commit, an abort
that cannot undo it, a failed job commit retried, and the next attempt of a job.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from .. import capabilities as caps
from ..committer import JOB_MARKER
from ..context import JobContext
from ..errors import CommitError
from ..factory import open_store
from ..store import Store
from ..success import SUCCESS_FILE, load_success
from .faults import Fault, FaultInjectingStore, failing_deletes_in
from .suite import ConformanceBase, Files, leftovers, visible_files


class RecoveryScenarios(ConformanceBase):
    """Continuity of correctness: what a repeated commit, an abort or a later attempt does."""

    def commit_leaving_state(self, make, dest: str, config, keep_markers: bool = True,  # type: ignore[no-untyped-def]
                             **extra: str) -> tuple[JobContext, list[dict[str, Any]], dict[str, bytes]]:
        """Commit a job whose deletions fail once its ``_SUCCESS`` is written: its state
        stays, as a driver killed right after ``_SUCCESS`` leaves it (``keep_markers=False``:
        its liveness markers did go, the first thing a cleanup deletes)."""
        success = threading.Event()

        def note_success(_operation: str, args: tuple[Any, ...]) -> bool:
            if args and isinstance(args[0], str) and args[0].endswith("/" + SUCCESS_FILE):
                success.set()
            return False

        def fails(_operation: str, args: tuple[Any, ...]) -> bool:
            marker = bool(args) and isinstance(args[0], str) and args[0].endswith("/" + JOB_MARKER)
            return success.is_set() and (keep_markers or not marker)

        faulty = FaultInjectingStore(open_store(dest, config), [
            Fault("save_json", times=-1, predicate=note_success),
            *(Fault(op, times=-1, predicate=fails) for op in ("delete", "delete_many", "delete_empty_dir"))])
        committer = make(dest, store=faulty, **extra)
        job = JobContext(dest, config=committer.config)
        committer.setup_job(job)
        messages = [self.run_task(committer, job, i, self.files_of(i)) for i in range(2)]
        expected = {k: v for i in range(2) for k, v in self.files_of(i).items()}
        committer.commit_job(job, messages)
        assert success.is_set() and any(f.fired for f in faulty.faults[1:])
        store = faulty.inner
        assert leftovers(store, store.strip(dest)), "the job's state should have stayed"
        return job, messages, expected

    def assert_committed(self, store: Store, dest: str, job: JobContext, expected: Files) -> None:
        """The job's output and its own ``_SUCCESS``, and no temporary state."""
        assert visible_files(store, store.strip(dest)) == expected
        report = load_success(store, store.join(store.strip(dest), SUCCESS_FILE))
        assert report.success and report.jobId == job.job_id
        self.assert_no_leaks(store, dest)

    def test_abort_after_the_commit_finished_keeps_its_output(self, make, store: Store, dest: str,  # type: ignore[no-untyped-def]
                                                              config) -> None:
        """A driver that dies after ``_SUCCESS``, deleting the job's state, leaves a
        committed job: an abort then (the operator's, from a new process) deletes only
        the state, never the output its ``_SUCCESS`` reports."""
        job, _, expected = self.commit_leaving_state(make, dest, config)
        again = make(dest)
        again.abort_job(job)
        again.cleanup_job(job)
        self.assert_committed(store, dest, job, expected)

    def test_repeated_commit_after_the_commit_finished_returns_its_report(  # type: ignore[no-untyped-def]
            self, make, store: Store, dest: str, config) -> None:
        """The same: ``commit_job`` called again (the job no longer active) returns the
        job's report and deletes the state left, for every committer. It never runs the
        commit again: conflict mode ``replace`` would delete what was written since."""
        replace = {"outcommit.committer.conflict-mode": "replace"}
        job, messages, expected = self.commit_leaving_state(make, dest, config, keep_markers=False,
                                                            **replace)
        since = {"later/written-since.txt": b"written after the job committed"}
        for rel, data in since.items():
            store.write_bytes(store.join(store.strip(dest), rel), data)
        report = make(dest, **replace).commit_job(job, messages)
        assert report.success and report.jobId == job.job_id
        self.assert_committed(store, dest, job, {**expected, **since})

    def test_repeated_commit_under_a_later_jobs_success_deletes_nothing(  # type: ignore[no-untyped-def]
            self, make, store: Store, dest: str, config) -> None:
        """The same, then another job commits into the destination (its ``_SUCCESS``
        hides this job's) before the repeated call, under ``replace``: whether that call
        commits again or refuses, neither job's files may go."""
        replace = {"outcommit.committer.conflict-mode": "replace"}
        job, messages, expected = self.commit_leaving_state(make, dest, config, keep_markers=False,
                                                            **replace)
        other = make(dest, **{"outcommit.committer.conflict-mode": "append"})
        other_job = JobContext(dest, config=other.config)
        other.setup_job(other_job)
        later = {"later/other-job.txt": b"another job's file"}
        other.commit_job(other_job, [self.run_task(other, other_job, 7, later)])
        try:
            make(dest, **replace).commit_job(job, messages)
        except CommitError:
            pass  # refused: the job is not active, and no _SUCCESS names it
        assert visible_files(store, store.strip(dest)) == {**expected, **later}

    def test_later_attempt_of_a_committed_job_publishes_nothing(  # type: ignore[no-untyped-def]
            self, make, store: Store, dest: str, config) -> None:
        """The same, then a new job attempt that reruns a task (its driver could not know
        the commit had finished): it returns the earlier report, and its own output (other
        bytes here) is never published: the job commits once."""
        committer = make(dest)
        if not committer.has_capability(caps.OUTPUT_INVISIBLE_UNTIL_JOB_COMMIT):
            pytest.skip(f"{committer.name} publishes at task commit")
        job, _, expected = self.commit_leaving_state(make, dest, config, keep_markers=False)
        later = job.next_attempt()
        restarted = make(dest)
        restarted.setup_job(later)
        self.run_task(restarted, later, 0, self.files_of(0, tag="rerun"))
        report = restarted.commit_job(later)
        assert report.jobId == job.job_id
        self.assert_committed(store, dest, job, expected)

    def test_an_abort_that_cannot_undo_the_commit_keeps_its_evidence(  # type: ignore[no-untyped-def]
            self, make, store: Store, dest: str, config) -> None:
        """A job commit published every file and failed writing ``_SUCCESS``; the abort
        cannot delete them (the store refuses). It must keep the job's state, the only
        evidence of which files are the job's, and ``cleanup_job`` after it too: the next
        abort then removes them. Deleting the state would leave them visible for good."""
        committer = make(dest)
        if not committer.has_capability(caps.OUTPUT_INVISIBLE_UNTIL_JOB_COMMIT):
            pytest.skip(f"{committer.name} publishes at task commit: abort cannot undo it")
        no_success = FaultInjectingStore(open_store(dest, config), [
            Fault("save_json", path_contains="/" + SUCCESS_FILE, times=-1)])
        failing = make(dest, store=no_success)
        job = JobContext(dest, config=failing.config)
        failing.setup_job(job)
        messages = [self.run_task(failing, job, i, self.files_of(i)) for i in range(2)]
        with pytest.raises(CommitError):
            failing.commit_job(job, messages)
        published = visible_files(store, store.strip(dest))
        assert published == {k: v for i in range(2) for k, v in self.files_of(i).items()}
        refusing = FaultInjectingStore(open_store(dest, config), failing_deletes_in(store.strip(dest)))
        first = make(dest, store=refusing)
        first.abort_job(job)
        first.cleanup_job(job)
        assert any(f.fired for f in refusing.faults)
        assert visible_files(store, store.strip(dest)) == published
        assert job.job_id in make(dest).recovery.state.leftover_jobs()
        second = make(dest)
        second.abort_job(job)
        second.cleanup_job(job)
        assert visible_files(store, store.strip(dest)) == {}
        assert make(dest).recovery.state.leftover_jobs() == {}
        self.assert_no_leaks(store, dest)

    def test_abort_job_without_task_abort(self, make, store: Store, dest: str) -> None:  # type: ignore[no-untyped-def]
        committer = make(dest)
        job = JobContext(dest, config=committer.config)
        committer.setup_job(job)
        committed = self.run_task(committer, job, 0, self.files_of(0))
        assert committed
        running = job.task_attempt(1)
        committer.setup_task(running)
        self.write(committer, running, self.files_of(1))
        committer.abort_job(job)
        committer.cleanup_job(job)
        if committer.has_capability(caps.OUTPUT_INVISIBLE_UNTIL_JOB_COMMIT):
            assert visible_files(store, store.strip(dest)) == {}
        else:  # v2-style: committed task output is already published; the rest is gone
            assert set(visible_files(store, store.strip(dest))) <= set(self.files_of(0))
        self.assert_no_leaks(store, dest)

    def test_job_commit_failure_then_retry(self, make, store: Store, dest: str, config) -> None:  # type: ignore[no-untyped-def]
        fault = Fault(**{k: getattr(self.job_commit_fault, k) for k in
                         ("operation", "path_contains", "when", "times", "skip", "error", "predicate")})
        faulty = FaultInjectingStore(open_store(dest, config), [])
        committer = make(dest, store=faulty)
        job = JobContext(dest, config=committer.config)
        committer.setup_job(job)
        messages = [self.run_task(committer, job, i, self.files_of(i)) for i in range(3)]
        expected = {k: v for i in range(3) for k, v in self.files_of(i).items()}
        faulty.add(fault)
        with pytest.raises(CommitError) as failure:
            committer.commit_job(job, messages)
        assert fault.fired == 1, "the job commit fault never fired: fix job_commit_fault"
        summary = getattr(failure.value, "summary", None)
        assert summary is not None and summary.success is False and summary.diagnostics
        if committer.has_capability(caps.JOB_COMMIT_REPEATABLE):
            committer.commit_job(job, messages)
            assert visible_files(store, store.strip(dest)) == expected
        else:
            with pytest.raises(CommitError, match="not repeatable"):
                committer.commit_job(job, messages)
            assert not store.exists(store.join(store.strip(dest), SUCCESS_FILE))
        committer.abort_job(job)
        committer.cleanup_job(job)
        self.assert_no_leaks(store, dest)

    def test_recovery_into_next_job_attempt(self, make, store: Store, dest: str) -> None:  # type: ignore[no-untyped-def]
        committer = make(dest)
        if not committer.has_capability(caps.JOB_RECOVERABLE):
            pytest.skip(f"{committer.name} does not support recovery")
        job0 = JobContext(dest, config=committer.config)
        committer.setup_job(job0)
        self.run_task(committer, job0, 0, self.files_of(0))
        uncommitted = job0.task_attempt(1)
        committer.setup_task(uncommitted)
        self.write(committer, uncommitted, {"lost.txt": b"never committed"})
        # The driver dies here; a new driver attempt of the same job starts.
        job1 = job0.next_attempt()
        restarted = make(dest)
        restarted.setup_job(job1)
        assert restarted.recover_task(job1.task_attempt(0))
        assert not restarted.recover_task(job1.task_attempt(1))
        self.run_task(restarted, job1, 1, self.files_of(1))
        restarted.commit_job(job1)
        expected = {**self.files_of(0), **self.files_of(1)}
        assert visible_files(store, store.strip(dest)) == expected
        self.assert_no_leaks(store, dest)
