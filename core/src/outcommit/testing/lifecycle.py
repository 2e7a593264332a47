"""Conformance scenarios of one job's life: tasks set up, written, committed or aborted,
attempts of a task, and a task commit that races or follows the job's commit.
"""

from __future__ import annotations

from typing import Any

import pytest

from .. import capabilities as caps
from ..context import JobContext
from ..errors import CommitError
from ..factory import open_store
from ..store import Store
from ..success import SUCCESS_FILE, load_success
from .faults import Fault, FaultInjectingStore
from .suite import ConformanceBase, visible_files


class LifecycleScenarios(ConformanceBase):
    """Complete, exclusive, abortable: one job, its tasks and their attempts."""

    def test_commit_lifecycle(self, make, store: Store, dest: str) -> None:  # type: ignore[no-untyped-def]
        committer = make(dest)
        job = JobContext(dest, config=committer.config)
        committer.setup_job(job)
        expected: dict[str, bytes] = {}
        messages = []
        for index in range(3):
            files = self.files_of(index)
            expected.update(files)
            task = job.task_attempt(index)
            committer.setup_task(task)
            self.write(committer, task, files)
            assert committer.needs_task_commit(task)
            messages.append(committer.commit_task(task))
            if committer.has_capability(caps.OUTPUT_INVISIBLE_UNTIL_JOB_COMMIT):
                assert visible_files(store, store.strip(dest)) == {}
        summary = committer.commit_job(job, messages)
        assert visible_files(store, store.strip(dest)) == expected
        report = load_success(store, store.join(store.strip(dest), SUCCESS_FILE))
        assert report.success and report.jobId == job.job_id and report.committer == committer.name
        assert summary.metrics["files.committed"] == len(expected)
        assert len(report.filenames) == len(expected)
        self.assert_no_leaks(store, dest)

    def test_commit_job_without_messages_discovers_tasks(self, make, store: Store, dest: str) -> None:  # type: ignore[no-untyped-def]
        committer = make(dest)
        job = JobContext(dest, config=committer.config)
        committer.setup_job(job)
        expected: dict[str, bytes] = {}
        for index in range(2):
            files = self.files_of(index)
            expected.update(files)
            self.run_task(committer, job, index, files)
        committer.commit_job(job)
        assert visible_files(store, store.strip(dest)) == expected
        self.assert_no_leaks(store, dest)

    def test_task_with_no_output(self, make, store: Store, dest: str) -> None:  # type: ignore[no-untyped-def]
        committer = make(dest)
        job = JobContext(dest, config=committer.config)
        committer.setup_job(job)
        empty = job.task_attempt(0)
        committer.setup_task(empty)
        assert not committer.needs_task_commit(empty)
        message = committer.commit_task(empty)
        other = self.run_task(committer, job, 1, {"only.txt": b"only"})
        committer.commit_job(job, [message, other])
        assert visible_files(store, store.strip(dest)) == {"only.txt": b"only"}
        self.assert_no_leaks(store, dest)

    def test_task_commit_after_job_commit_fails(self, make, store: Store, dest: str) -> None:  # type: ignore[no-untyped-def]
        committer = make(dest)
        job = JobContext(dest, config=committer.config)
        committer.setup_job(job)
        first = self.run_task(committer, job, 0, self.files_of(0))
        late = job.task_attempt(1)
        committer.setup_task(late)
        committer.commit_job(job, [first])
        # The late attempt keeps writing after the job committed, then tries to commit.
        try:
            self.write(committer, late, {"late.txt": b"late"})
        except (OSError, CommitError):
            pass  # refusing the write is fine too
        with pytest.raises(CommitError):
            committer.commit_task(late)
        committer.abort_task(late)
        committer.cleanup_job(job)
        assert "late.txt" not in visible_files(store, store.strip(dest))
        assert visible_files(store, store.strip(dest)) == self.files_of(0)
        self.assert_no_leaks(store, dest)

    def test_straggler_task_commit_racing_job_commit(self, make, store: Store, dest: str,  # type: ignore[no-untyped-def]
                                                     config) -> None:
        """A late attempt whose job commits and cleans up in the middle of its task commit."""
        if self.task_publish_operation is None:
            pytest.skip("the binding names no task publish operation")
        faulty = FaultInjectingStore(open_store(dest, config), [])
        committer = make(dest, store=faulty)
        if not committer.has_capability(caps.OUTPUT_INVISIBLE_UNTIL_JOB_COMMIT):
            pytest.skip(f"{committer.name} publishes at task commit")
        job = JobContext(dest, config=committer.config)
        committer.setup_job(job)
        winner = self.run_task(committer, job, 0, self.files_of(0))
        late = job.task_attempt(1)
        committer.setup_task(late)
        self.write(committer, late, self.files_of(1, "late"))

        committed: list[str] = []

        def job_commits_first(operation: str, args: tuple[Any, ...]) -> bool:
            # Right before the straggler publishes, the driver commits without it. (The
            # attempt is named by a path, or by the data published: a claim's path does not.)
            names_late = any(late.attempt_id in a if isinstance(a, str) else
                             isinstance(a, bytes) and late.attempt_id.encode() in a for a in args)
            if names_late and not committed:
                committed.append(operation)
                committer.commit_job(job, [winner])
            return False

        faulty.add(Fault(self.task_publish_operation, predicate=job_commits_first))
        with pytest.raises(CommitError):
            committer.commit_task(late)
        assert committed, f"{self.task_publish_operation} never published the straggler"
        committer.abort_task(late)
        assert visible_files(store, store.strip(dest)) == self.files_of(0)
        self.assert_no_leaks(store, dest)

    def test_two_attempts_of_one_task(self, make, store: Store, dest: str) -> None:  # type: ignore[no-untyped-def]
        committer = make(dest)
        job = JobContext(dest, config=committer.config)
        committer.setup_job(job)
        failed = job.task_attempt(0, 0)
        committer.setup_task(failed)
        self.write(committer, failed, {"attempt.txt": b"attempt 0", "only-in-0.txt": b"0"})
        committer.abort_task(failed)
        message = self.run_task(committer, job, 0, {"attempt.txt": b"attempt 1"}, attempt=1)
        committer.commit_job(job, [message])
        assert visible_files(store, store.strip(dest)) == {"attempt.txt": b"attempt 1"}
        self.assert_no_leaks(store, dest)

    def test_second_attempt_commits_after_first_committed(self, make, store: Store, dest: str) -> None:  # type: ignore[no-untyped-def]
        """Only one attempt's output is in the result, even when both committed."""
        committer = make(dest)
        job = JobContext(dest, config=committer.config)
        committer.setup_job(job)
        if not committer.has_capability(caps.TASK_COMMIT_REPEATABLE):
            pytest.skip(f"{committer.name}: task commit is not repeatable, a second commit is refused")
        first = self.run_task(committer, job, 0, {"a.txt": b"first", "first-only.txt": b"x"}, attempt=0)
        second = self.run_task(committer, job, 0, {"a.txt": b"second"}, attempt=1)
        assert isinstance(first, dict) and isinstance(second, dict)
        committer.commit_job(job, [second])
        assert visible_files(store, store.strip(dest)) == {"a.txt": b"second"}
        self.assert_no_leaks(store, dest)

    def test_abort_task_then_job(self, make, store: Store, dest: str) -> None:  # type: ignore[no-untyped-def]
        committer = make(dest)
        job = JobContext(dest, config=committer.config)
        committer.setup_job(job)
        for index in range(2):
            task = job.task_attempt(index)
            committer.setup_task(task)
            self.write(committer, task, self.files_of(index))
            committer.abort_task(task)
            committer.abort_task(task)  # twice: never raises
        committer.abort_job(job)
        committer.cleanup_job(job)
        assert visible_files(store, store.strip(dest)) == {}
        assert not store.exists(store.join(store.strip(dest), SUCCESS_FILE))
        self.assert_no_leaks(store, dest)
