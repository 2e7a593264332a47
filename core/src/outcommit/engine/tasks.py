"""Where a task attempt is committed, for engines that cannot ask a commit coordinator.

Hadoop and Spark commit a task on the executor only after the driver's commit
coordinator has allowed that attempt, so at most one attempt of a task ever commits.
A PySpark data source's task (and a Ray or Dask task) returns its message before any
coordinator has decided: every attempt that finishes, speculative copies included, would
commit. That is harmless only for committers with ``task-commit.isolated`` (each
attempt's commit is its own, and job commit takes exactly the accepted messages). For
the others (``v1`` renames over the task's one committed directory, ``v2`` publishes
into the destination) the task only writes, and the driver commits the attempts it
accepted, right before job commit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import capabilities as caps
from ..committer import Committer
from ..context import JobContext, TaskAttemptContext
from ..errors import CommitError, InjectedFailure
from ..parallel import run_all
from .formats import WrittenFile
from .writer import StreamingWriter


def commits_on_executor(committer: Committer) -> bool:
    """May a task attempt commit itself, without the driver's permission?"""
    return committer.has_capability(caps.TASK_COMMIT_ISOLATED)


def commit_accepted_attempts(committer: Committer, job: JobContext,
                             attempts: Sequence[tuple[int, int]]) -> list[Mapping[str, Any]]:
    """Commit (task index, attempt) pairs on the driver; their messages, in the same order.

    Only the attempts the engine accepted are committed: a losing attempt's output stays
    in its own work area, which job commit or abort removes with the job's temporary state.
    """
    def commit(pair: tuple[int, int]) -> Mapping[str, Any]:
        return committer.commit_task(job.task_attempt(*pair))

    return run_all(commit, attempts, committer.threads, "outcommit-task-commit")


@dataclass
class AttemptResult:
    """What one task attempt reports to its driver (picklable, engine-neutral).

    ``task_message`` is the committer's message when the attempt committed itself;
    ``commit_on_driver`` says that the driver must commit it once it accepted the attempt
    (committers without ``task-commit.isolated``).
    """

    task_index: int
    attempt: int
    task_message: dict[str, Any] | None
    commit_on_driver: bool
    files: list[WrittenFile] = field(default_factory=list)

    @property
    def rows(self) -> int:
        return sum(f.rows for f in self.files)

    @property
    def bytes(self) -> int:
        return sum(f.bytes for f in self.files)


@dataclass(frozen=True)
class WriteSettings:
    """How a task attempt lays out its files (the StreamingWriter's settings)."""

    fmt: str = "parquet"
    partition_by: tuple[str, ...] = ()
    max_rows_per_file: int = 0
    max_bytes_per_file: int = 0
    file_options: dict[str, Any] = field(default_factory=dict)


def write_attempt(committer: Committer, task: TaskAttemptContext, batches: Iterable[Any],
                  settings: WriteSettings,
                  on_file: Callable[[int, str, int], None] | None = None,
                  schema: Any = None) -> AttemptResult:
    """One task attempt of an engine without a commit coordinator: set up, write, commit.

    ``on_file(seq, relative_path, files_closed)`` is called before each file is opened
    (engines' failure injection and test hooks stop an attempt there). ``schema`` (Arrow):
    the columns of the attempt's rows, which task 0 writes as a file with no rows when it
    gets none (:class:`~outcommit.engine.writer.StreamingWriter`, Spark's rule): an empty
    job then leaves readers its columns, not only ``_SUCCESS``.

    The attempt commits itself only if the committer's task commit is isolated; otherwise
    it only writes and the driver commits it once accepted (:func:`commit_accepted_attempts`).
    On failure the attempt's output is aborted, except for an :class:`InjectedFailure`
    (a test's stand-in for a killed process, which cleans nothing up: job commit or
    abort must).
    """
    committer.setup_task(task)

    def before_file(seq: int, relative: str) -> None:
        if on_file is not None:
            on_file(seq, relative, len(writer.written))

    writer = StreamingWriter(
        committer.filesystem(task), committer.work_path(task), task.index, task.job_id, task.attempt,
        settings.fmt, settings.partition_by, max_rows_per_file=settings.max_rows_per_file,
        max_bytes_per_file=settings.max_bytes_per_file, options=dict(settings.file_options),
        on_file=before_file, schema=schema)
    try:
        for batch in batches:
            writer.write_batch(batch)
        written = writer.close()
        # An attempt that wrote files must commit; asking the store first costs a listing.
        needs_commit = bool(written) or committer.needs_task_commit(task)
        on_executor = commits_on_executor(committer)
        message = committer.commit_task(task) if needs_commit and on_executor else None
    except InjectedFailure:
        raise
    except BaseException:
        writer.abort()
        committer.abort_task(task)
        raise
    return AttemptResult(task.index, task.attempt, message, needs_commit and not on_executor,
                         list(written))


def job_messages(committer: Committer, job: JobContext,
                 results: Sequence[AttemptResult]) -> list[Mapping[str, Any]]:
    """The task messages of the accepted attempts, committing on the driver those that wait.

    ``results`` must hold one attempt per task (the engine's accepted attempts).
    """
    indexes = [r.task_index for r in results]
    if len(set(indexes)) != len(indexes):
        raise CommitError(f"job {job.job_id}: more than one accepted attempt of a task "
                          f"({sorted(i for i in set(indexes) if indexes.count(i) > 1)})")
    ordered = sorted(results, key=lambda r: r.task_index)
    messages: list[Mapping[str, Any]] = [r.task_message for r in ordered if r.task_message is not None]
    messages += commit_accepted_attempts(
        committer, job, [(r.task_index, r.attempt) for r in ordered if r.commit_on_driver])
    return messages
