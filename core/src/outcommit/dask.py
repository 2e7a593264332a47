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
after a lost worker (or a ``retries=`` retry) runs again from scratch. Each execution
therefore draws its own attempt number (random, distinct with overwhelming probability),
so a re-run never writes into a dead execution's work area; the client's result holds
one execution per partition, and job commit and cleanup remove the others' leftovers.

Dask is imported only when a function here is called: ``outcommit`` never needs it.
"""

from __future__ import annotations

import logging
import os
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .context import JobContext
from .engine.tasks import AttemptResult, WriteSettings, job_messages, write_attempt
from .engine.writer import FORMATS
from .errors import ConfigError, InjectedFailure
from .factory import create_committer, open_store
from .store import Store
from .success import SuccessData

log = logging.getLogger("outcommit.dask")

__all__ = ["DaskWrite", "to_parquet", "write"]

_STORES: dict[tuple[str, tuple[tuple[str, str], ...]], Store] = {}


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


@dataclass
class DaskWrite:
    """The outcome of a write: the job's ``_SUCCESS`` data and the attempts committed."""

    summary: SuccessData
    results: list[AttemptResult] = field(default_factory=list)


def _store(destination: str, config: dict[str, str]) -> Store:
    key = (destination, tuple(sorted(config.items())))
    if key not in _STORES:
        _STORES[key] = open_store(destination, config)
    return _STORES[key]


def _first_execution(plan: _Plan, index: int) -> bool:
    """Test hook: True the first time partition ``index`` runs (a marker file says later)."""
    try:
        with open(os.path.join(plan.marker_dir, f"partition-{index}.failed"), "x"):
            return True
    except FileExistsError:
        return False


def _write_partition(frame: Any, plan: _Plan, index: int) -> AttemptResult:
    """One execution of one partition: a task attempt with its own attempt number."""
    import pyarrow as pa

    committer = create_committer(plan.destination, plan.config, plan.committer,
                                 store=_store(plan.destination, plan.config))
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
    result = write_attempt(committer, job.task_attempt(index, attempt),
                           table.to_batches(max_chunksize=64 * 1024), plan.settings, on_file)
    if fail_now:
        on_file(0, "", 1)
    return result


def write(ddf: Any, destination: str, *, committer: str | None = None,
          config: Mapping[str, Any] | None = None, format: str = "parquet",
          partition_by: Sequence[str] = (), max_rows_per_file: int = 0, max_bytes_per_file: int = 0,
          file_options: Mapping[str, Any] | None = None, fail_partition_once: int | None = None,
          failure: str = "raise", marker_dir: str = "", **compute_kwargs: Any) -> DaskWrite:
    """Write every partition of the Dask DataFrame ``ddf`` to ``destination``, exactly once.

    ``compute_kwargs`` go to ``dask.compute`` (``scheduler=``, ``retries=`` with a
    distributed client, ...). ``fail_partition_once``/``failure``/``marker_dir`` are a
    test hook: the first execution of that partition dies after writing a file.
    """
    from dask.base import compute as dask_compute
    from dask.delayed import delayed as dask_delayed

    delayed: Any = dask_delayed  # dask's functions are untyped
    compute: Any = dask_compute
    if format not in FORMATS:
        raise ConfigError(f"format={format!r}: use one of {', '.join(FORMATS)}")
    if fail_partition_once is not None and not marker_dir:
        raise ConfigError("fail_partition_once needs marker_dir (a directory every worker can see)")
    cfg = {str(k): str(v) for k, v in (config or {}).items()}
    the_committer = create_committer(destination, cfg, committer)
    job = JobContext(destination, config=the_committer.config)
    plan = _Plan(destination, the_committer.name, the_committer.selection, cfg, job.to_dict(),
                 WriteSettings(format, tuple(partition_by), max_rows_per_file, max_bytes_per_file,
                               dict(file_options or {})),
                 fail_partition_once, failure, marker_dir)
    the_committer.setup_job(job)
    log.info("job %s: writing %d partitions to %s with %s (%s)", job.job_id, ddf.npartitions,
             destination, the_committer.name, the_committer.selection)
    try:
        tasks = [delayed(_write_partition, pure=False)(part, plan, index)
                 for index, part in enumerate(ddf.to_delayed())]
        results: list[AttemptResult] = list(compute(*tasks, **compute_kwargs))
        the_committer.add_metrics({"rows.written": sum(r.rows for r in results),
                                   "files.written": sum(len(r.files) for r in results),
                                   "bytes.written": sum(r.bytes for r in results),
                                   "dask.partitions": len(results)})
        summary = the_committer.commit_job(job, job_messages(the_committer, job, results))
    except BaseException:
        log.warning("job %s: the write to %s failed: aborting", job.job_id, destination)
        the_committer.abort_job(job)
        the_committer.cleanup_job(job)
        raise
    return DaskWrite(summary, results)


def to_parquet(ddf: Any, destination: str, **kwargs: Any) -> DaskWrite:
    """``write(ddf, destination, format="parquet", ...)``."""
    return write(ddf, destination, format="parquet", **kwargs)
