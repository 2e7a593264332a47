"""Ray Data: ``ds.write_datasink(outcommit.ray.Datasink(url, ...))`` through a committer.

    import outcommit.ray
    ds.write_datasink(outcommit.ray.Datasink("s3://bucket/table", partition_by=["date"]),
                      ray_remote_args={"max_retries": 3})

The lifecycle is the protocol's (docs/protocol.md, engines' duties):

- ``__init__`` (driver): the committer is created, so an unknown or unsafe one fails
  before any task runs;
- ``on_write_start`` (driver): job setup. Ray calls it with the first block's schema,
  and not at all for a dataset with no blocks (``limit(0)``): ``on_write_complete`` then
  sets the job up;
- ``write`` (a Ray task): one task attempt. Ray tasks cannot ask the driver for
  permission to commit, so the attempt commits itself only where the committer's task
  commit is isolated (magic, staging, manifest); otherwise (v1, v2) it only writes
  (``outcommit.engine.tasks``). It returns its result, which Ray hands to the driver
  only for the attempt that succeeded;
- ``on_write_complete`` (driver): the attempts waiting for the driver are committed, then
  the job, with exactly the returned attempts' messages. Task 0 of a Parquet write writes
  the schema as a file with no rows when it got none (Spark's rule: an empty dataset
  keeps its columns); with no blocks at all no task ran, and the driver writes it if it
  knows the schema (``schema=``). A retried task's failed
  attempts (a crashed worker leaves its files, or its pending uploads) are no message:
  job commit and cleanup remove them;
- ``on_write_failed`` (driver): abort and cleanup.

A failed write does not wait for its other tasks: Ray Data cancels them (an interrupt,
not a wait) and calls ``on_write_failed`` at once, so a task may still be writing when
the job is aborted, and a file it closes afterwards would outlive the abort. So the
driver marks the job aborted before it aborts, and a task checks that mark after
writing (write, then check): a task that saw no mark wrote everything before the abort
began, which removes it; a task that sees the mark aborts and cleans up the job itself
(both idempotent) and fails. A task that sees the mark before writing writes nothing.

The marks, and each task's attempt number (which Ray's public runtime context does not
tell), are kept by one small actor per driver process (:class:`JobStates`: no CPU, started
with the first write, alive as long as the driver), which the tasks reach through the
handle the sink carries: Ray's public actor API only (it replaced ``ray._private`` and the
internal key-value store, which change between minor releases).

Ray is imported only when ``Datasink`` is first used: ``outcommit`` never needs it.
"""

from __future__ import annotations

import functools
import logging
import os
import secrets
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .committer import Committer
from .context import JobContext
from .engine.formats import FORMATS
from .engine.tasks import AttemptResult, WriteSettings, job_messages, write_attempt
from .errors import CommitError, ConfigError, InjectedFailure
from .factory import create_committer, shared_store
from .install import install_command
from .success import SuccessData

log = logging.getLogger("outcommit.ray")

__all__ = ["Datasink", "DatasinkBase", "JobStates", "job_states", "task_attempt_number"]


class JobStates:
    """What the tasks of a driver's writes ask it: their attempt numbers and the abort marks
    (module docs). Run as a Ray actor (:func:`job_states`); a plain object in a test."""

    def __init__(self) -> None:
        self._attempts: dict[tuple[str, int], int] = {}
        self._aborted: set[str] = set()

    def next_attempt(self, job_id: str, index: int) -> int:
        """0 for a task's first attempt, then 1, 2... for Ray's retries of it."""
        number = self._attempts.get((job_id, index), 0)
        self._attempts[(job_id, index)] = number + 1
        return number

    def mark_aborted(self, job_id: str) -> None:
        self._aborted.add(job_id)

    def is_aborted(self, job_id: str) -> bool:
        return job_id in self._aborted

    def forget(self, job_id: str) -> None:
        """A committed job's counters go (no task of it runs any more); abort marks never
        do: a straggler may check one at any time after the abort (a few bytes each)."""
        self._attempts = {k: v for k, v in self._attempts.items() if k[0] != job_id}


_STATES: list[Any] = []  # this driver process's JobStates actor handle, once started
_STATES_LOCK = threading.Lock()


def job_states() -> Any:
    """This driver process's :class:`JobStates` actor (started on first use, and again if
    it died or Ray was restarted); None outside a Ray driver. It lives while the driver
    keeps the handle, which this module does (a non-detached actor: it ends with the
    driver, and its tasks with it)."""
    import ray

    if not ray.is_initialized():
        return None
    with _STATES_LOCK:
        if _STATES:
            try:
                ray.get(_STATES[0].is_aborted.remote(""))
                return _STATES[0]
            except Exception:  # died, or belongs to a Ray session since shut down
                log.warning("the outcommit job-state actor is gone: starting another", exc_info=True)
                _STATES.clear()
        handle = _job_states_actor().remote()
        _STATES.append(handle)
        return handle


@functools.cache
def _job_states_actor() -> Any:
    import ray

    # No CPU: it must never wait for a slot the write's own tasks hold.
    return ray.remote(num_cpus=0, max_restarts=0)(JobStates)


def task_attempt_number(states: Any, job_id: str, index: int) -> int:
    """The running task's attempt number (0, then 1 for its first retry, ...), from the
    driver's :class:`JobStates`. Where it cannot answer, a random number: attempts need
    distinct numbers, not consecutive ones."""
    if states is not None:
        try:
            import ray

            return int(ray.get(states.next_attempt.remote(job_id, index)))
        except Exception:
            log.warning("job %s: the driver's job-state actor gave task %d no attempt number: "
                        "drawing one", job_id, index, exc_info=True)
    return secrets.randbelow(1 << 30) + 1000


def _mark_aborted(states: Any, job_id: str) -> bool:
    """Record with the driver's :class:`JobStates` that ``job_id`` is aborted (module
    docs); False where it cannot be recorded."""
    if states is None:
        return False
    try:
        import ray

        ray.get(states.mark_aborted.remote(job_id))
        return True
    except Exception:
        log.warning("could not mark job %s aborted: a task still writing may leave files "
                    "behind", job_id, exc_info=True)
        return False


def _is_aborted(states: Any, job_id: str) -> bool:
    """Whether the driver marked ``job_id`` aborted; False outside Ray (no mark can exist).

    Fails closed: where the mark cannot be read (the driver's job-state actor is gone),
    this raises, so the task fails (Ray retries it, or the write fails and is aborted)
    instead of keeping output that the abort may already have passed by.
    """
    if states is None:
        return False
    try:
        import ray

        return bool(ray.get(states.is_aborted.remote(job_id)))
    except Exception as exc:
        log.error("could not read job %s's abort mark: failing the task", job_id, exc_info=True)
        raise CommitError(f"job {job_id}: cannot tell whether the job was aborted ({exc}): "
                          f"the task fails rather than keep its output") from exc


def _forget(states: Any, job_id: str) -> None:
    """A committed job's attempt counters go (never raises: the job is committed)."""
    if states is None:
        return
    try:
        states.forget.remote(job_id)  # nothing waits for the answer
    except Exception:
        log.warning("job %s: the job-state actor could not be told the job ended", job_id,
                    exc_info=True)


class DatasinkBase:
    """The committer lifecycle of a Ray Data write (see the module docs); ``Datasink`` adds
    Ray's base class."""

    def __init__(self, destination: str, *, committer: str | None = None,
                 config: Mapping[str, Any] | None = None, format: str = "parquet",
                 partition_by: Sequence[str] = (), max_rows_per_file: int = 0,
                 max_bytes_per_file: int = 0, file_options: Mapping[str, Any] | None = None,
                 fail_task_once: int | None = None, failure: str = "crash",
                 schema: Any = None) -> None:
        if format not in FORMATS:
            raise ConfigError(f"format={format!r}: use one of {', '.join(FORMATS)}")
        if failure not in ("crash", "raise"):
            raise ConfigError(f"failure={failure!r}: 'crash' or 'raise'")
        self.destination = destination
        self.config = {str(k): str(v) for k, v in (config or {}).items()}
        # Created on the driver first: an unknown or unsafe committer fails before any task.
        created = create_committer(destination, self.config, committer)
        self.committer_name = created.name
        self.selection = created.selection
        self.settings = WriteSettings(format, tuple(partition_by), max_rows_per_file, max_bytes_per_file,
                                      dict(file_options or {}))
        #: The columns written (task 0's file when it gets no rows): ``schema=``, else the one
        #: Ray passes to on_write_start, else the first block's.
        self.given_schema = arrow_schema(schema)
        self.schema: Any = self.given_schema
        #: Test hook: attempt 0 of this task dies after writing a file, without cleaning
        #: up ("crash": its worker process exits, as a lost node; "raise": an exception).
        self.fail_task_once = fail_task_once
        self.failure = failure
        self.job: dict[str, Any] = {}
        #: The driver's JobStates actor (set at job setup, carried to the tasks).
        self.states: Any = None
        self.summary: SuccessData | None = None
        self.results: list[AttemptResult] = []
        self._started = 0.0

    def _committer(self) -> tuple[Committer, JobContext]:
        if not self.job:
            raise CommitError("the outcommit Datasink's job was not set up: use it through "
                              "Dataset.write_datasink, which calls on_write_start first")
        committer = create_committer(self.destination, self.config, self.committer_name,
                                     store=shared_store(self.destination, self.config))
        committer.selection = self.selection
        return committer, JobContext.from_dict(self.job)

    # -- driver -----------------------------------------------------------------------------------
    def on_write_start(self, schema: Any = None) -> None:
        # A new job for every write (the tasks get this object as it is after this call,
        # measured with Ray 2.60): a Datasink may be used twice.
        self.job = JobContext(self.destination, config=self.config, task_messages=True).to_dict()
        self.states = job_states()
        self.schema = self.given_schema or _ray_schema(schema)
        committer, job = self._committer()
        self._started = time.monotonic()
        committer.setup_job(job)
        log.info("job %s: writing %s with %s (%s)", job.job_id, self.destination, committer.name,
                 committer.selection)

    def on_write_complete(self, write_result: Any) -> None:
        returns = write_result.write_returns if hasattr(write_result, "write_returns") else write_result
        results = [r for r in returns if isinstance(r, AttemptResult)]
        if not self.job and not results:
            # No block at all (limit(0)): Ray called neither on_write_start nor a task.
            self.on_write_start()
        committer, job = self._committer()
        try:
            if not results and self.schema is not None:
                # Task 0's file with the schema and no rows, as a task would have written it.
                results = [write_attempt(committer, job.task_attempt(0, 0), [], self.settings,
                                         schema=self.schema)]
            committer.reports.add_metrics({
                "rows.written": sum(r.rows for r in results),
                "files.written": sum(len(r.files) for r in results),
                "bytes.written": sum(r.bytes for r in results),
                "ray.tasks": len(results),
                "ray.task.retries": sum(1 for r in results if r.attempt > 0)})
            self.summary = committer.commit_job(job, job_messages(committer, job, results))
        except BaseException:
            log.error("job %s: job commit to %s failed: aborting", job.job_id, self.destination)
            committer.abort_job(job)
            committer.cleanup_job(job)
            raise
        self.results = sorted(results, key=lambda r: r.task_index)
        _forget(self.states, job.job_id)
        log.info("job %s: committed %s: %d files, %d rows from %d tasks (%d retried) in %.1f s",
                 job.job_id, self.destination, sum(len(r.files) for r in results),
                 sum(r.rows for r in results), len(results),
                 sum(1 for r in results if r.attempt > 0), time.monotonic() - self._started)

    def on_write_failed(self, error: Exception) -> None:
        if not self.job:
            return  # no job was set up: nothing to abort
        try:
            committer, job = self._committer()
            log.warning("job %s: the write to %s failed (%s): aborting", job.job_id, self.destination,
                        error)
            # First the mark: a task still writing checks it after its last write.
            _mark_aborted(self.states, job.job_id)
            # Every attempt's leftovers, also those of attempts that died without a result.
            committer.abort_job(job)
            committer.cleanup_job(job)
        except Exception:  # abort never raises: Ray is already reporting the real failure
            log.warning("abort of job %s failed", self.job.get("jobId"), exc_info=True)

    # -- task attempt -----------------------------------------------------------------------------
    def write(self, blocks: Iterable[Any], ctx: Any) -> AttemptResult:
        committer, job = self._committer()
        index = int(ctx.task_idx)
        attempt = task_attempt_number(self.states, job.job_id, index)
        fail_now = self.fail_task_once == index and attempt == 0

        def on_file(seq: int, relative: str, closed: int) -> None:
            if fail_now and closed >= 1:
                if self.failure == "crash":
                    os._exit(17)  # the worker dies mid-write: nothing is cleaned up
                raise InjectedFailure(f"injected failure: Ray task {index} attempt {attempt} "
                                      f"dies after writing {closed} file(s)")

        if _is_aborted(self.states, job.job_id):
            raise CommitError(f"job {job.job_id} was aborted: task {index} writes nothing")
        try:
            result = write_attempt(committer, job.task_attempt(index, attempt), _arrow_batches(blocks),
                                   self.settings, on_file, schema=self.schema)
            if fail_now:
                on_file(0, "", max(1, len(result.files)))
        finally:
            aborted = _is_aborted(self.states, job.job_id)  # write, then check (module docs)
            if aborted:
                log.warning("job %s was aborted while task %d attempt %d wrote: cleaning up after it",
                            job.job_id, index, attempt)
                committer.abort_job(job)
                committer.cleanup_job(job)
        if aborted:
            raise CommitError(f"job {job.job_id} was aborted while task {index} wrote: its output "
                              f"is removed")
        return result

    def get_name(self) -> str:
        return "Outcommit"


if TYPE_CHECKING:  # at run time, __getattr__ builds it on Ray Data's base class
    Datasink = DatasinkBase


def _arrow_batches(blocks: Iterable[Any]) -> Iterable[Any]:
    """Ray blocks (Arrow tables or pandas frames) as Arrow record batches; an empty block
    as one empty batch, which tells the writer its schema (``to_batches()`` gives none)."""
    import pyarrow as pa

    for block in blocks:
        table = block if isinstance(block, pa.Table) else pa.Table.from_pandas(block, preserve_index=False)
        if table.num_rows == 0:
            yield pa.RecordBatch.from_pylist([], schema=table.schema)
        else:
            yield from table.to_batches()


def arrow_schema(schema: Any) -> Any:
    """``schema=`` as an Arrow schema: a ``pyarrow.Schema`` or Ray's ``ds.schema()`` of Arrow
    blocks; None for none. Anything else is a ConfigError, before any task runs."""
    if schema is None:
        return None
    import pyarrow as pa

    base = getattr(schema, "base_schema", schema)  # Ray's Schema wraps pyarrow's
    if isinstance(base, pa.Schema):
        return base
    raise ConfigError(f"schema={schema!r} is not an Arrow schema: give a pyarrow.Schema (for a "
                      "dataset of pandas blocks: pyarrow.Schema.from_pandas(frame))")


def _ray_schema(schema: Any) -> Any:
    """The schema Ray passes to on_write_start, as Arrow; None where it is not one."""
    try:
        return arrow_schema(schema)
    except ConfigError:
        return None


@functools.cache
def _datasink_class() -> type:
    import ray.data

    class Datasink(DatasinkBase, ray.data.Datasink[AttemptResult]):
        """``ds.write_datasink(outcommit.ray.Datasink(url, ...))``."""

    # Pickled by reference (``outcommit.ray.Datasink``): workers import it as users do.
    Datasink.__module__ = __name__
    Datasink.__qualname__ = "Datasink"
    return Datasink


def __getattr__(name: str) -> Any:
    if name == "Datasink":
        try:
            return _datasink_class()
        except ImportError as exc:
            raise ImportError(f"outcommit.ray needs Ray Data: {install_command('outcommit', 'ray')} "
                              f"({exc})") from exc
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
