"""The shared conformance suite: lifecycle, failure and abort scenarios for any committer x store.

Subclass it in a test module and provide the fixtures; pytest collects the subclass::

    class TestV1OnFile(CommitterConformance):
        @pytest.fixture
        def committer_name(self):
            return "v1"

        @pytest.fixture
        def destination_root(self, tmp_path):
            return f"file://{tmp_path}"

Fixtures a subclass provides: ``committer_name``, ``destination_root`` (the URL of a
directory of the store: each test works in a new directory below it, which the suite
removes after, pending uploads and all) and optionally ``config`` (dict). ``job_commit_fault`` (class
attribute) is a fault that makes this committer's job commit fail part-way;
``task_publish_operation`` the store operation by which its task commit publishes the
attempt (for the straggler scenario; None skips it).

The oracles are the correctness properties of docs/protocol.md#correctness-properties:
complete, exclusive, abortable, continuity of correctness, no leaks, containment.
"""

from __future__ import annotations

import posixpath
import threading
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

from ..extras import require

require("pytest", "testing", "outcommit.testing.conformance (the committer conformance suite)")

import pytest  # noqa: E402  (after the check: a missing pytest names the extra that brings it)

from .. import capabilities as caps  # noqa: E402
from ..committer import JOB_MARKER, Committer  # noqa: E402
from ..context import JobContext, TaskAttemptContext  # noqa: E402
from ..errors import CommitError, CorruptFileError  # noqa: E402
from ..factory import create_committer, open_store  # noqa: E402
from ..paths import hidden_from_readers  # noqa: E402
from ..store import Store  # noqa: E402
from ..success import SUCCESS_FILE, load_success  # noqa: E402
from .faults import Fault, FaultInjectingStore, failing_deletes_in  # noqa: E402
from .roots import own_directory  # noqa: E402

Files = Mapping[str, bytes]
#: Directories of a job's state in its destination: magic's, and staging's (``directory``,
#: ``partitioned``) where no shared staging directory is configured.
JOB_STATE_PREFIXES = ("__magic", "__staging")


def visible_files(store: Store, dest: str) -> dict[str, bytes]:
    """Data files under ``dest``, with content: what readers see (Spark's rule,
    :func:`outcommit.paths.hidden_from_readers`: ``_src=a/`` is a partition)."""
    found: dict[str, bytes] = {}
    for info in store.list_files(dest):
        rel = info.path[len(dest.rstrip("/")) + 1:]
        if hidden_from_readers(rel):
            continue
        found[rel] = store.read_bytes(info.path)
    return found


def leftovers(store: Store, dest: str) -> list[str]:
    """Temporary state a finished job must not leave: temp dirs and pending uploads.

    Uncommitted blocks of a block-list store (Azure) are not counted: nothing can remove
    one writer's blocks alone, and the service discards them (docs/azure.md); they are
    invisible to readers, which ``visible_files`` checks.
    """
    left = [info.path for info in store.list_files(dest)
            if any(part == "_temporary" or part.startswith(JOB_STATE_PREFIXES)
                   for part in info.path[len(dest.rstrip("/")) + 1:].split("/"))]
    left += [c.path for c in store.list_dir(dest)
             if c.name == "_temporary" or c.name.startswith(JOB_STATE_PREFIXES)]
    multipart = store.multipart()
    if multipart is not None:
        left += [f"pending upload {u.path} {u.upload_id}"
                 for u in multipart.list_pending(dest.rstrip("/") + "/")]
    return sorted(set(left))


def run_tasks(committer: Committer, job: JobContext, tasks: int = 2,
              n: int = 2) -> tuple[list[dict[str, Any]], dict[str, bytes]]:
    """Set up, write (``n`` files in a ``p=<index>`` partition each) and commit ``tasks`` tasks.

    Returns the task messages and the files the job should publish.
    """
    messages, expected = [], {}
    for index in range(tasks):
        task = job.task_attempt(index)
        committer.setup_task(task)
        files = {f"p={index}/part-{index}-{i}.bin": f"task {index} file {i}".encode() for i in range(n)}
        CommitterConformance.write(committer, task, files)
        expected.update(files)
        messages.append(committer.commit_task(task))
    return messages, expected


class CommitterConformance:
    """Abstract suite: not collected itself (no ``Test`` prefix), run by subclasses."""

    job_commit_fault: Fault = Fault("rename_file")
    task_publish_operation: str | None = None

    # -- fixtures a binding provides ------------------------------------------------
    @pytest.fixture
    def committer_name(self) -> str:
        raise NotImplementedError("the binding must provide the committer_name fixture")

    @pytest.fixture
    def destination_root(self) -> str:
        raise NotImplementedError("the binding must provide the destination_root fixture")

    @pytest.fixture
    def config(self) -> dict[str, Any]:
        return {}

    # -- helpers ------------------------------------------------------------------------
    @pytest.fixture
    def test_root(self, destination_root: str, config: dict[str, Any],
                  request: pytest.FixtureRequest) -> Iterator[str]:
        """This test's own directory below ``destination_root``, made for it and removed
        after, pending uploads and all (``outcommit.testing.roots``): a binding may give a
        fixed root, such as a real bucket's."""
        yield from own_directory(destination_root, request.node.name, config)

    @pytest.fixture
    def dest(self, test_root: str) -> str:
        return test_root + "/dataset1"

    @pytest.fixture
    def store(self, dest: str, config: dict[str, Any]) -> Store:
        return open_store(dest, config)

    @pytest.fixture
    def make(self, committer_name: str, config: dict[str, Any]):  # type: ignore[no-untyped-def]
        def make(url: str, store: Store | None = None, **extra: Any) -> Committer:
            return create_committer(url, {**config, **extra}, committer_name, store=store)
        return make

    @staticmethod
    def write(committer: Committer, task: TaskAttemptContext, files: Files) -> None:
        fs, base = committer.filesystem(task), committer.work_path(task)
        for rel, data in files.items():
            with fs.open(posixpath.join(base, rel), "wb") as f:
                f.write(data)

    def run_task(self, committer: Committer, job: JobContext, index: int, files: Files,
                 attempt: int = 0) -> dict[str, Any]:
        task = job.task_attempt(index, attempt)
        committer.setup_task(task)
        self.write(committer, task, files)
        return committer.commit_task(task)

    @staticmethod
    def files_of(index: int, tag: str = "", n: int = 2) -> dict[str, bytes]:
        return {f"part-{index:05d}-{i}.txt": f"task {index} file {i} {tag}".encode() for i in range(n)}

    def assert_no_leaks(self, store: Store, dest_url: str) -> None:
        assert leftovers(store, store.strip(dest_url)) == []

    # -- scenarios ------------------------------------------------------------------
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
        assert job.job_id in make(dest).leftover_jobs()
        second = make(dest)
        second.abort_job(job)
        second.cleanup_job(job)
        assert visible_files(store, store.strip(dest)) == {}
        assert make(dest).leftover_jobs() == {}
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

    def test_concurrent_task_commits_with_subdirectories(self, make, store: Store, dest: str) -> None:  # type: ignore[no-untyped-def]
        committer = make(dest)
        job = JobContext(dest, config=committer.config)
        committer.setup_job(job)
        tasks = 6
        files = {i: {f"sub/part-{i}.txt": f"{i}".encode(), f"sub/deeper/d-{i}.txt": b"d",
                     f"year=2024/month={i % 2}/p-{i}.txt": b"p"} for i in range(tasks)}
        for i in range(tasks):
            task = job.task_attempt(i)
            committer.setup_task(task)
            self.write(committer, task, files[i])
        messages: list[dict[str, Any]] = []
        errors: list[BaseException] = []
        barrier = threading.Barrier(tasks)

        def commit(i: int) -> None:
            try:
                barrier.wait()
                messages.append(committer.commit_task(job.task_attempt(i)))
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=commit, args=(i,)) for i in range(tasks)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        committer.commit_job(job, messages)
        expected = {k: v for i in range(tasks) for k, v in files[i].items()}
        found = visible_files(store, store.strip(dest))
        assert found == expected
        assert not any("sub/sub" in path or "deeper/deeper" in path for path in found)
        self.assert_no_leaks(store, dest)

    def test_adjacent_destinations(self, make, store: Store, test_root: str) -> None:  # type: ignore[no-untyped-def]
        root = test_root
        one, ten = f"{root}/dataset1", f"{root}/dataset10"
        c1, c10 = make(one), make(ten)
        j1, j10 = JobContext(one, config=c1.config), JobContext(ten, config=c10.config)
        c1.setup_job(j1)
        c10.setup_job(j10)
        m10 = self.run_task(c10, j10, 0, {"ten.txt": b"10"})
        m1 = self.run_task(c1, j1, 0, {"one.txt": b"1"})
        # dataset1's abort must not touch dataset10's pending work...
        c1.abort_job(j1)
        c1.cleanup_job(j1)
        c10.commit_job(j10, [m10])
        assert visible_files(store, store.strip(ten)) == {"ten.txt": b"10"}
        if c1.has_capability(caps.OUTPUT_INVISIBLE_UNTIL_JOB_COMMIT):
            assert visible_files(store, store.strip(one)) == {}
        # ...and a commit of dataset1 must not take dataset10's output.
        c1b = make(one)
        j1b = JobContext(one, config=c1b.config)
        c1b.setup_job(j1b)
        m1b = self.run_task(c1b, j1b, 0, {"one.txt": b"1b"})
        c1b.commit_job(j1b, [m1b])
        assert m1 and visible_files(store, store.strip(one)) == {"one.txt": b"1b"}
        assert visible_files(store, store.strip(ten)) == {"ten.txt": b"10"}
        self.assert_no_leaks(store, one)
        self.assert_no_leaks(store, ten)

    def test_two_concurrent_jobs_with_distinct_ids(self, make, store: Store, dest: str) -> None:  # type: ignore[no-untyped-def]
        ca, cb = make(dest, **{"outcommit.committer.conflict-mode": "append"}), \
            make(dest, **{"outcommit.committer.conflict-mode": "append"})
        ja, jb = JobContext(dest, config=ca.config), JobContext(dest, config=cb.config)
        assert ja.job_id != jb.job_id
        ca.setup_job(ja)
        cb.setup_job(jb)
        ma = self.run_task(ca, ja, 0, {"a.txt": b"job a"})
        mb = self.run_task(cb, jb, 0, {"b.txt": b"job b"})
        ca.commit_job(ja, [ma])
        if cb.has_capability(caps.OUTPUT_INVISIBLE_UNTIL_JOB_COMMIT):
            assert visible_files(store, store.strip(dest)) == {"a.txt": b"job a"}
        cb.commit_job(jb, [mb])
        assert visible_files(store, store.strip(dest)) == {"a.txt": b"job a", "b.txt": b"job b"}
        report = load_success(store, store.join(store.strip(dest), SUCCESS_FILE))
        assert report.jobId == jb.job_id
        self.assert_no_leaks(store, dest)

    @pytest.mark.parametrize("name", ["with space/file name.txt", "ünïcødé/données €.txt",
                                      "日本語/ファイル.txt"])
    def test_paths_with_spaces_and_unicode(self, make, store: Store, test_root: str,  # type: ignore[no-untyped-def]
                                           name: str) -> None:
        dest = test_root + "/out put/ünï"
        committer = make(dest)
        job = JobContext(dest, config=committer.config)
        committer.setup_job(job)
        message = self.run_task(committer, job, 0, {name: b"content"})
        committer.commit_job(job, [message])
        assert visible_files(store, store.strip(dest)) == {name: b"content"}
        self.assert_no_leaks(store, dest)

    def test_corrupt_task_message_is_refused(self, make, store: Store, dest: str) -> None:  # type: ignore[no-untyped-def]
        committer = make(dest)
        job = JobContext(dest, config=committer.config)
        committer.setup_job(job)
        message = self.run_task(committer, job, 0, self.files_of(0))
        other_job = {**message, "jobId": str(uuid.uuid4())}
        with pytest.raises((CorruptFileError, CommitError)):
            committer.commit_job(job, [other_job])
        assert visible_files(store, store.strip(dest)) == {} or \
            not committer.has_capability(caps.OUTPUT_INVISIBLE_UNTIL_JOB_COMMIT)
        committer.abort_job(job)
        self.assert_no_leaks(store, dest)

