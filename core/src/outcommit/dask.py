"""Dask: ``outcommit.dask.to_parquet(ddf, url, ...)`` through a committer.

    import outcommit.dask
    summary = outcommit.dask.to_parquet(ddf, "s3://bucket/table", partition_by=["date"])

The lifecycle is the protocol's (docs/protocol.md, engines' duties): the client creates
the committer (an unknown or unsafe one fails before any task) and sets the job up; each
partition is a task attempt (``outcommit.engine.tasks.write_attempt``) that commits
itself where the committer's task commit is isolated and otherwise only writes; the
client commits the attempts that wait for it and the job, with exactly the results the
computation returned; on any failure it aborts and cleans up.

Dask tells a task neither its attempt nor whether it ran before: a partition recomputed
after a lost worker runs again from scratch. Each execution therefore draws its own
attempt number (random, distinct with overwhelming probability), so a re-run never
writes into a dead execution's work area; the client's result holds one execution per
partition, and job commit and cleanup remove the others' leftovers.

No task may still be writing when the client aborts (a straggler writing into a job
directory being deleted can survive the deletion). Dask's schedulers raise at the first
failed task and leave the others running, so a partition task never raises: it returns
its failure, every task has ended when the computation returns, and the client retries
failed partitions itself (``max_attempts``), each retry a new execution.

Dask is imported only when a function here is called: ``outcommit`` never needs it.
"""

from __future__ import annotations

import logging
import os
import secrets
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from .context import JobContext
from .engine.formats import FORMATS
from .engine.tasks import AttemptResult, WriteSettings, job_messages, write_attempt
from .errors import CommitError, ConfigError, InjectedFailure
from .factory import create_committer, shared_store
from .success import SuccessData

log = logging.getLogger("outcommit.dask")

__all__ = ["DaskWrite", "to_parquet", "write"]


@dataclass(frozen=True)
class _Plan:
    """What every partition task needs: picklable, no live clients."""

    destination: str
    committer: str
    selection: str
    config: dict[str, str]
    job: dict[str, Any]
    settings: WriteSettings
    fail_partition_once: int | None = None
    failure: str = "raise"
    marker_dir: str = ""


@dataclass(frozen=True)
class _Failure:
    """A partition execution that failed: the client decides (retry, or abort the job)."""

    index: int
    error: str


@dataclass
class DaskWrite:
    """The outcome of a write: the job's ``_SUCCESS`` data and the attempts committed."""

    summary: SuccessData
    results: list[AttemptResult] = field(default_factory=list)


def _first_execution(plan: _Plan, index: int) -> bool:
    """Test hook: True the first time partition ``index`` runs (a marker file says later)."""
    try:
        with open(os.path.join(plan.marker_dir, f"partition-{index}.failed"), "x"):
            return True
    except FileExistsError:
        return False


def _write_partition(frame: Any, plan: _Plan, index: int) -> AttemptResult | _Failure:
    """One execution of one partition; a failure is returned, never raised (module docs)."""
    try:
        return _write_attempt(frame, plan, index)
    except Exception as exc:  # write_attempt cleaned up after itself (an injected "kill" did not)
        return _Failure(index, f"{type(exc).__name__}: {exc}")


def _write_attempt(frame: Any, plan: _Plan, index: int) -> AttemptResult:
    """A task attempt with its own attempt number."""
    import pyarrow as pa

    committer = create_committer(plan.destination, plan.config, plan.committer,
                                 store=shared_store(plan.destination, plan.config))
    committer.selection = plan.selection
    job = JobContext.from_dict(plan.job)
    attempt = secrets.randbelow(1 << 30)  # see the module docs: Dask has no attempt number
    fail_now = plan.fail_partition_once == index and _first_execution(plan, index)

    def on_file(seq: int, relative: str, closed: int) -> None:
        if fail_now and closed >= 1:
            if plan.failure == "crash":
                os._exit(17)  # the worker process dies mid-write: nothing is cleaned up
            raise InjectedFailure(f"injected failure: partition {index} dies after writing "
                                  f"{closed} file(s)")

    table = frame if isinstance(frame, pa.Table) else pa.Table.from_pandas(frame, preserve_index=False)
    # The partition's schema: partition 0 writes it as a file with no rows if it has none.
    result = write_attempt(committer, job.task_attempt(index, attempt),
                           table.to_batches(max_chunksize=64 * 1024), plan.settings, on_file,
                           schema=table.schema)
    if fail_now:
        on_file(0, "", 1)
    return result


_DISTRIBUTED = ("distributed", "dask.distributed")
_THREADS = ("threads", "threading")
#: Logged (INFO) when the client, its computation having failed or started on a
#: distributed client, waits for every task to end before going on (tests hook it).
WAITING = "waiting for every partition task to end"


def _is_client(scheduler: Any) -> bool:
    """A ``distributed.Client`` (or one like it) passed as ``scheduler=``."""
    return not isinstance(scheduler, str) and hasattr(scheduler, "compute") and hasattr(scheduler, "submit")


def _distributed_client(name: Any) -> Any:
    """The distributed client that runs the computation, or None for a local scheduler.

    ``name`` is ``scheduler=`` or else dask's configured scheduler (dask's own order): a
    client object, "distributed"/"dask.distributed" (the current client), or nothing
    (the current client if there is one).
    """
    if _is_client(name):
        return name
    if name is not None and not (isinstance(name, str) and name.lower() in _DISTRIBUTED):
        return None
    try:
        from distributed import Client

        current: Any = Client.current  # distributed's functions are untyped
        return current()
    except (ImportError, ValueError) as exc:
        if name is None:
            return None
        raise ConfigError(f"scheduler={name!r} but no distributed Client is active ({exc})") from exc


def _compute_all(tasks: list[Any], compute_kwargs: dict[str, Any]) -> list[Any]:
    """Every task's outcome, returned only once every task has ended.

    Dask's schedulers raise at the first failed task (a failed upstream task, a worker
    lost more often than allowed) while the others still run. On a distributed client
    (passed as ``scheduler=``, named "distributed", or the active one) the client submits
    the tasks, waits for all of them, then collects each outcome. Dask's threaded
    scheduler gets a pool of ours, and the call returns or raises only once that pool
    has finished every task it started. The process scheduler shuts its own pool down
    (waiting) before it raises, and the synchronous one runs one task at a time. A
    ``pool=`` or an executor given by the caller is the caller's to wait for.
    """
    import dask
    from dask.base import compute as dask_compute

    compute: Any = dask_compute  # dask's functions are untyped
    configured: Any = dask.config.get  # dask's functions are untyped
    scheduler = compute_kwargs.pop("scheduler", None)
    if scheduler is None:
        scheduler = configured("scheduler", None)
    client = _distributed_client(scheduler)
    if client is not None:
        from distributed import wait as distributed_wait

        wait: Any = distributed_wait
        futures = client.compute(tasks, **compute_kwargs)
        log.info("%s: %d tasks on %s", WAITING, len(futures), client)
        wait(futures)
        return [f.result() if f.status == "finished" else _Failure(-1, f"{f.exception()!r}")
                for f in futures]
    scheduler = scheduler or "threads"
    pool: ThreadPoolExecutor | None = None
    if "pool" not in compute_kwargs and isinstance(scheduler, str) and scheduler.lower() in _THREADS:
        import dask.threaded

        pool_class: type[ThreadPoolExecutor] = getattr(  # dask >= 2025 carries contextvars
            dask.threaded, "ContextAwareThreadPoolExecutor", ThreadPoolExecutor)
        pool = pool_class(int(compute_kwargs.pop("num_workers", 0) or os.cpu_count() or 1))
        compute_kwargs["pool"] = pool
    try:
        return list(compute(*tasks, scheduler=scheduler, **compute_kwargs))
    except BaseException:
        if pool is not None:
            log.info("the computation failed: %s", WAITING)
        raise
    finally:
        if pool is not None:
            pool.shutdown(wait=True)


def write(ddf: Any, destination: str, *, committer: str | None = None,
          config: Mapping[str, Any] | None = None, format: str = "parquet",
          partition_by: Sequence[str] = (), max_rows_per_file: int = 0, max_bytes_per_file: int = 0,
          file_options: Mapping[str, Any] | None = None, max_attempts: int = 2,
          fail_partition_once: int | None = None, failure: str = "raise", marker_dir: str = "",
          **compute_kwargs: Any) -> DaskWrite:
    """Write every partition of the Dask DataFrame ``ddf`` to ``destination``, exactly once.

    A partition whose execution fails is run again, up to ``max_attempts`` executions
    (a lost worker's task is re-run by Dask's scheduler itself). ``compute_kwargs`` go to
    ``dask.compute`` or the distributed client's ``compute`` (``scheduler=``, ...).
    ``fail_partition_once``/``failure``/``marker_dir`` are a test hook: the first
    execution of that partition dies after writing a file.
    """
    if max_attempts < 1:
        raise ConfigError(f"max_attempts={max_attempts}: at least 1")
    if format not in FORMATS:
        raise ConfigError(f"format={format!r}: use one of {', '.join(FORMATS)}")
    if fail_partition_once is not None and not marker_dir:
        raise ConfigError("fail_partition_once needs marker_dir (a directory every worker can see)")
    cfg = {str(k): str(v) for k, v in (config or {}).items()}
    the_committer = create_committer(destination, cfg, committer)
    job = JobContext(destination, config=the_committer.config, task_messages=True)
    plan = _Plan(destination, the_committer.name, the_committer.selection, cfg, job.to_dict(),
                 WriteSettings(format, tuple(partition_by), max_rows_per_file, max_bytes_per_file,
                               dict(file_options or {})),
                 fail_partition_once, failure, marker_dir)
    the_committer.setup_job(job)
    log.info("job %s: writing %d partitions to %s with %s (%s)", job.job_id, ddf.npartitions,
             destination, the_committer.name, the_committer.selection)
    try:
        results, reruns = _run_partitions(ddf, plan, job, max_attempts, dict(compute_kwargs))
        the_committer.reports.add_metrics({"rows.written": sum(r.rows for r in results),
                                   "files.written": sum(len(r.files) for r in results),
                                   "bytes.written": sum(r.bytes for r in results),
                                   "dask.partitions": len(results),
                                   "dask.partition.reruns": reruns})
        summary = the_committer.commit_job(job, job_messages(the_committer, job, results))
    except BaseException:
        log.warning("job %s: the write to %s failed: aborting", job.job_id, destination)
        the_committer.abort_job(job)
        the_committer.cleanup_job(job)
        raise
    return DaskWrite(summary, results)


def _run_partitions(ddf: Any, plan: _Plan, job: JobContext, max_attempts: int,
                    compute_kwargs: dict[str, Any]) -> tuple[list[AttemptResult], int]:
    """Every partition written once: the failed ones run again, up to ``max_attempts``
    executions. (The results in partition order, how many executions were reruns.)"""
    from dask.delayed import delayed as dask_delayed

    delayed: Any = dask_delayed  # dask's functions are untyped
    parts = ddf.to_delayed()
    done: dict[int, AttemptResult] = {}
    pending, executions, reruns = list(range(len(parts))), 0, 0
    failures: list[str] = []
    while pending and executions < max_attempts:
        reruns += len(pending) if executions else 0
        executions += 1
        tasks = [delayed(_write_partition, pure=False)(parts[i], plan, i) for i in pending]
        outcomes = _compute_all(tasks, dict(compute_kwargs))
        failures = []
        for index, outcome in zip(pending, outcomes, strict=True):
            if isinstance(outcome, AttemptResult):
                done[index] = outcome
            else:
                failures.append(f"partition {index}: {outcome.error}")
                log.warning("job %s: partition %d failed (execution %d of at most %d): %s",
                            job.job_id, index, executions, max_attempts, outcome.error)
        pending = [i for i in pending if i not in done]
    if pending:
        raise CommitError(f"job {job.job_id}: {len(pending)} partitions failed {max_attempts} "
                          f"times: {failures[0]}")
    return [done[i] for i in sorted(done)], reruns


def to_parquet(ddf: Any, destination: str, **kwargs: Any) -> DaskWrite:
    """``write(ddf, destination, format="parquet", ...)``."""
    return write(ddf, destination, format="parquet", **kwargs)
