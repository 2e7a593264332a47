"""A local driver: runs a job's tasks in a thread or process pool through a committer.

The lifecycle is the one Spark drives: job setup on the driver; per task attempt setup,
write, commit (the driver lets one attempt of each task commit) and a message back;
job commit with exactly the messages of the committed attempts; abort on failure.
A :class:`FailurePoint` makes a chosen attempt fail at a chosen point (tests, demo).
"""

from __future__ import annotations

import logging
import multiprocessing
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any, Literal

from .. import capabilities as caps
from ..committer import Committer
from ..context import JobContext, TaskAttemptContext
from ..errors import CommitError, ConfigError, InjectedFailure
from ..extras import require
from ..factory import create_committer, shared_store
from ..stores.memory import MemoryStore
from ..success import SuccessData
from .formats import FORMATS, WrittenFile, check_compression
from .partitioning import check_partition_types
from .writer import StreamingWriter, check_basename_template

log = logging.getLogger(__name__)

Point = Literal["mid-write", "before-commit", "after-commit"]


@dataclass(frozen=True)
class FailurePoint:
    """Fail attempt ``attempt`` of task ``task`` at ``point``.

    ``mid-write``: after ``after_files`` files were written. ``before-commit``: output
    written, commit not called. ``after-commit``: committed, but the message is lost (a
    lost executor). ``crash=True`` skips the attempt's own abort, as a killed process would.
    """

    task: int
    attempt: int = 0
    point: Point = "mid-write"
    after_files: int = 1
    crash: bool = False


@dataclass(frozen=True)
class TaskSpec:
    """Everything a task attempt needs, picklable for a process pool."""

    destination: str
    committer: str
    config: dict[str, str]
    job: dict[str, Any]
    index: int
    attempt: int
    table: Any
    fmt: str
    partition_by: tuple[str, ...]
    max_rows_per_file: int
    failure: FailurePoint | None
    max_bytes_per_file: int = 0
    file_options: dict[str, Any] = field(default_factory=dict)
    basename_template: str | None = None


@dataclass
class TaskResult:
    message: dict[str, Any]
    rows: int
    files: int
    bytes: int


@dataclass
class JobResult:
    summary: SuccessData
    committer: str
    selection: str
    messages: list[dict[str, Any]]
    attempts: dict[int, int] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    rows: int = 0
    files: int = 0
    bytes: int = 0
    duration_s: float = 0.0


def run_task_attempt(spec: TaskSpec, writing: AbstractContextManager[Any] | None = None) -> TaskResult:
    """One task attempt: setup, write, commit. Runs in a worker thread or process.

    ``writing``, if given, is held while the attempt writes: a slot among the tasks allowed
    to write at once (thread pools). Setup and commit are mostly waiting for the store
    (magic: the last parts, publishing the pendingset; staging: uploading the files):
    they run outside the slot, so another task encodes meanwhile.
    """
    committer = create_committer(spec.destination, spec.config, spec.committer,
                                 store=shared_store(spec.destination, spec.config))
    task = TaskAttemptContext(JobContext.from_dict(spec.job), spec.index, spec.attempt)
    failure = spec.failure
    committer.setup_task(task)
    try:
        with writing or nullcontext():
            written = _write(committer, task, spec)
        if failure and failure.point == "before-commit":
            raise InjectedFailure(f"injected failure of task {spec.index} before commit")
        message = committer.commit_task(task)
        if failure and failure.point == "after-commit":
            raise InjectedFailure(f"injected loss of task {spec.index}'s commit message")
    except BaseException:
        if not (failure and failure.crash):
            committer.abort_task(task)
        raise
    message = {**message, "stats": {"rows": sum(w.rows for w in written),
                                    "files": len(written), "bytes": sum(w.bytes for w in written)}}
    return TaskResult(message, sum(w.rows for w in written), len(written),
                      sum(w.bytes for w in written))


def _write(committer: Committer, task: TaskAttemptContext, spec: TaskSpec) -> list[WrittenFile]:
    """The attempt's rows into its work path; fails where ``spec.failure`` says (mid-write)."""
    failure = spec.failure

    def maybe_fail(seq: int, rel: str) -> None:
        if failure and failure.point == "mid-write" and seq >= failure.after_files:
            raise InjectedFailure(
                f"injected failure of task {spec.index} attempt {spec.attempt} mid-write")

    # A table, or any iterable of record batches: written as they come.
    batches = spec.table.to_batches(max_chunksize=64 * 1024) \
        if hasattr(spec.table, "to_batches") else spec.table
    written = StreamingWriter(committer.filesystem(task), committer.work_path(task), spec.index,
                              task.job_id, spec.attempt, spec.fmt, spec.partition_by,
                              max_rows_per_file=spec.max_rows_per_file,
                              max_bytes_per_file=spec.max_bytes_per_file,
                              options=dict(spec.file_options), on_file=maybe_fail,
                              schema=getattr(spec.table, "schema", None),
                              basename_template=spec.basename_template).write_batches(batches)
    if failure and failure.point == "mid-write":
        maybe_fail(len(written) + failure.after_files, "")
    return written


class LocalDriver:
    """Runs one job: ``LocalDriver(dest).run(tables)`` writes ``tables[i]`` in task ``i``."""

    def __init__(self, destination: str, *, committer: str | None = None,
                 config: Mapping[str, Any] | None = None, workers: int = 2,
                 mode: Literal["thread", "process"] = "thread", max_attempts: int = 2,
                 fmt: str = "parquet", partition_by: Sequence[str] = (),
                 max_rows_per_file: int = 0, failures: Sequence[FailurePoint] = (),
                 progress: Callable[[str], None] | None = None, max_bytes_per_file: int = 0,
                 row_group_size: int = 0, compression: str | None = None,
                 basename_template: str | None = None) -> None:
        require("pyarrow", "engine", "the local engine (outcommit.engine.local.LocalDriver)")
        if mode not in ("thread", "process"):
            raise ConfigError(f"LocalDriver mode={mode!r}: use 'thread' or 'process'")
        if workers < 1 or max_attempts < 1:
            raise ConfigError(f"LocalDriver needs workers >= 1 and max_attempts >= 1 "
                              f"(workers={workers}, max_attempts={max_attempts})")
        self.destination = destination
        self.config = {str(k): str(v) for k, v in (config or {}).items()}
        # Created on the driver first: an unknown or unsafe committer fails before any task runs.
        self.committer = create_committer(destination, self.config, committer)
        if mode == "process" and isinstance(self.committer.store, MemoryStore):
            raise ConfigError(f"{destination}: a memory:// store lives in one process, so its "
                              "tasks cannot run in others: use mode='thread'")
        self.workers = workers
        self.mode = mode
        self.max_attempts = max_attempts
        self.fmt = fmt
        self.partition_by = tuple(partition_by)
        self.max_rows_per_file = max_rows_per_file
        if fmt not in FORMATS:
            raise ConfigError(f"unknown format {fmt!r}: use one of {', '.join(FORMATS)}")
        if min(max_rows_per_file, max_bytes_per_file, row_group_size) < 0:
            raise ConfigError("max_rows_per_file, max_bytes_per_file and row_group_size must be >= 0")
        self.max_bytes_per_file = max_bytes_per_file
        # Checked here: a codec pyarrow cannot write fails before any task runs.
        codec = check_compression(fmt, compression)
        self.file_options: dict[str, Any] = {}
        if fmt == "parquet":
            if row_group_size:
                self.file_options["row_group_size"] = row_group_size
            if codec:
                self.file_options["compression"] = codec
        check_basename_template(basename_template)
        self.basename_template = basename_template
        self.failures = list(failures)
        self.progress = progress or (lambda _msg: None)

    def _executor(self) -> Executor:
        if self.mode == "process":
            return ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"))
        # ``workers`` tasks write at once (the slots); as many more threads let the attempts
        # that finished writing commit meanwhile.
        return ThreadPoolExecutor(2 * self.workers, thread_name_prefix="outcommit-task")

    def _spec(self, job: JobContext, index: int, attempt: int, table: Any) -> TaskSpec:
        failure = next((f for f in self.failures if f.task == index and f.attempt == attempt), None)
        return TaskSpec(self.destination, self.committer.name, self.config, job.to_dict(), index,
                        attempt, table, self.fmt, self.partition_by, self.max_rows_per_file, failure,
                        self.max_bytes_per_file, dict(self.file_options), self.basename_template)

    def _check_tables(self, tables: Sequence[Any]) -> None:
        """Refuse, before the job is set up, tables this job cannot write: partition columns
        the data cannot be split by fail before any task runs, for the tasks given as tables
        (an iterable of batches shows its schema only in its task)."""
        if self.basename_template and len(tables) > 1:
            # {i} counts one task's files: two tasks' part-0.parquet would replace each other.
            raise ConfigError(f"basename_template names the files of one task: give one table, "
                              f"not {len(tables)}, or leave basename_template out")
        for table in tables:
            if hasattr(table, "schema"):
                check_partition_types(table.schema, self.partition_by)

    def run(self, tables: Sequence[Any], job: JobContext | None = None) -> JobResult:
        started = time.monotonic()
        committer = self.committer
        self._check_tables(tables)
        job = job or JobContext(self.destination, config=committer.config, task_messages=True)
        committer.setup_job(job)
        self.progress(f"job {job.job_id}: {len(tables)} tasks, committer {committer.name} "
                      f"({committer.selection})")
        results: dict[int, TaskResult] = {}
        attempts: dict[int, int] = {}
        failures: list[str] = []
        try:
            slots = threading.BoundedSemaphore(self.workers) if self.mode == "thread" else None
            with self._executor() as pool:
                pending: dict[Future[TaskResult], tuple[int, int]] = {}
                for index, table in enumerate(tables):
                    spec = self._spec(job, index, 0, table)
                    pending[pool.submit(run_task_attempt, spec, slots)] = (index, 0)
                while pending:
                    future = next(iter(_completed(pending)))
                    index, attempt = pending.pop(future)
                    attempts[index] = attempt + 1
                    try:
                        results[index] = future.result()
                        self.progress(f"task {index} attempt {attempt} committed "
                                      f"({results[index].files} files, {results[index].rows} rows)")
                        continue
                    except Exception as exc:
                        failures.append(f"task {index} attempt {attempt}: {exc}")
                        self.progress(f"task {index} attempt {attempt} failed: {exc}")
                        committed = isinstance(exc, InjectedFailure) and "commit message" in str(exc)
                        if committed and not committer.has_capability(caps.TASK_COMMIT_REPEATABLE):
                            raise CommitError(
                                f"task {index} failed after its commit started and {committer.name} "
                                "task commit is not repeatable: failing the job") from exc
                        if attempt + 1 >= self.max_attempts:
                            raise CommitError(f"task {index} failed {attempt + 1} times: {exc}") from exc
                    retry = self._spec(job, index, attempt + 1, tables[index])
                    pending[pool.submit(run_task_attempt, retry, slots)] = (index, attempt + 1)
            messages = [results[i].message for i in sorted(results)]
            self.progress(f"committing job {job.job_id} ({len(messages)} task messages)")
            stats = {"rows": sum(r.rows for r in results.values()),
                     "files": sum(r.files for r in results.values()),
                     "bytes": sum(r.bytes for r in results.values())}
            committer.reports.add_metrics({f"{k}.written": v for k, v in stats.items()})
            summary = committer.commit_job(job, messages)
        except BaseException:
            self.progress(f"job {job.job_id} failed: aborting")
            committer.abort_job(job)
            committer.cleanup_job(job)
            raise
        return JobResult(summary, committer.name, committer.selection, messages, attempts, failures,
                         stats["rows"], stats["files"], stats["bytes"], time.monotonic() - started)


def _completed(pending: Mapping[Future[TaskResult], Any]) -> list[Future[TaskResult]]:
    from concurrent.futures import FIRST_COMPLETED, wait

    done, _ = wait(list(pending), return_when=FIRST_COMPLETED)
    return list(done)
