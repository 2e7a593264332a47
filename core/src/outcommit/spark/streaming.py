"""The ``outcommit`` Structured Streaming sink (PySpark >= 4.1).

    df.writeStream.format("outcommit").option("checkpointLocation", ckpt).start("s3://b/events")

Where each piece runs (measured with PySpark 4.3): Spark creates the writer with
``streamWriter()`` in a Python process of the driver before every micro-batch, pickles
it to that batch's tasks (``write()``, one per task attempt), and creates it again in
another driver process to call ``commit(messages, batchId)`` or ``abort``. No call
before the tasks knows the batch id, so the tasks find their batch's job themselves,
from the query id, batch id and run id that Spark gives every task of a micro-batch
(``outcommit.streaming.sink`` has the protocol: batch log, replays, rollback).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage

from ..engine.tasks import write_attempt
from ..errors import InjectedFailure, OutcommitError
from ..factory import shared_store
from ..streaming.sink import BatchIdentity, BatchTaskResult, StreamingSink
from .logs import driver_logging as _driver_logging
from .logs import reported_to_spark
from .options import StreamPlan
from .session import SessionSnapshot

log = logging.getLogger("outcommit.spark")

# Local properties Spark sets on every task of a micro-batch (MicroBatchExecution,
# StreamExecution: the run id is the job group of the run's jobs).
QUERY_ID_PROPERTY = "sql.streaming.queryId"
BATCH_ID_PROPERTY = "streaming.sql.batchId"
RUN_ID_PROPERTY = "spark.jobGroup.id"
PAUSE_DEADLINE_S = 600.0


@dataclass
class OutcommitStreamMessage(WriterCommitMessage):
    """What one task attempt of a micro-batch sends to the driver."""

    result: BatchTaskResult


def task_identity(context: Any) -> BatchIdentity:
    """The query, batch and run of the running Spark task."""
    query, batch, run = (context.getLocalProperty(p) for p in
                         (QUERY_ID_PROPERTY, BATCH_ID_PROPERTY, RUN_ID_PROPERTY))
    if not query or batch is None or not run:
        raise OutcommitError(
            "the outcommit streaming sink found no streaming query, batch or run id in the task's "
            f"local properties ({QUERY_ID_PROPERTY}={query!r}, {BATCH_ID_PROPERTY}={batch!r}, "
            f"{RUN_ID_PROPERTY}={run!r}): it runs only in micro-batch queries (not continuous "
            "processing), and needs a PySpark version that sets them (4.1 to 4.3 do)")
    return BatchIdentity(query, int(batch), run)


def pause(hooks_dir: str, point: str, batch_id: int) -> None:
    """Test hook: mark ``point`` reached, then wait to be killed (``<hooks>/release`` or a deadline)."""
    marker = os.path.join(hooks_dir, f"{point}-{batch_id}.reached")
    try:
        with open(marker, "x") as f:
            f.write(str(os.getpid()))
    except FileExistsError:
        pass  # another task of the batch got here first
    end = time.monotonic() + PAUSE_DEADLINE_S
    while not os.path.exists(os.path.join(hooks_dir, "release")):
        if time.monotonic() >= end:
            raise InjectedFailure(f"paused at {point} of batch {batch_id} and never killed")
        time.sleep(0.05)  # waiting to be killed: the test's SIGKILL is the event


class OutcommitStreamWriter(DataSourceStreamArrowWriter):
    """Created on the driver for every micro-batch and every commit; pickled to the tasks."""

    def __init__(self, plan: StreamPlan, session: SessionSnapshot | None = None) -> None:
        self.plan = plan
        #: The session config the driver's steps use, which every task compares with the
        #: running session's (as the batch writer's tasks do; None: no check).
        self.session = session
        # Built here first: an unknown or unsafe committer fails before any task runs.
        self._sink()

    def _sink(self) -> StreamingSink:
        plan = self.plan.write
        on_step = None
        if self.plan.pause_point and self.plan.pause_point[0].startswith("commit-"):
            step, at_batch = self.plan.pause_point[0].removeprefix("commit-"), self.plan.pause_point[1]

            def on_step(name: str, batch_id: int) -> None:
                if name == step and batch_id == at_batch:
                    pause(self.plan.hooks_dir, f"commit-{name}", batch_id)

        return StreamingSink(plan.destination, plan.config, plan.committer,
                             compact_interval=self.plan.compact_interval,
                             store=shared_store(plan.destination, plan.config), on_step=on_step)

    # -- task attempt (executor) ------------------------------------------------------------
    def write(self, iterator: Iterator[Any]) -> OutcommitStreamMessage:
        from pyspark import TaskContext

        context = TaskContext.get()
        if context is None:
            raise OutcommitError("OutcommitStreamWriter.write runs only inside a Spark task")
        if self.session is not None:
            # Before anything is recorded or written: the commit will run with the session
            # config the driver read (none, when Spark found the sink by itself).
            with reported_to_spark("task attempt"):
                self.session.check(context.getLocalProperty, self.plan.write.option_keys)
        identity = task_identity(context)
        index, attempt = context.partitionId(), context.attemptNumber()
        sink = self._sink()
        job = sink.begin_task(identity)
        if job is None:
            for _ in iterator:  # a replay of a committed batch: its rows are in the log already
                pass
            return OutcommitStreamMessage(BatchTaskResult(identity, None, note="batch committed already"))
        pause_at = self.plan.pause_point
        pause_here = pause_at is not None and pause_at == ("write", identity.batch_id)

        def on_file(seq: int, relative: str, closed: int) -> None:
            if pause_here and closed >= 1:  # a file written (for magic: an upload pending)
                pause(self.plan.hooks_dir, "write", identity.batch_id)

        task = job.task_attempt(index, attempt)
        result = write_attempt(sink.committer, task, iterator, self.plan.write.settings(), on_file)
        if sink.committed_meanwhile(identity, job.job_id):
            # Write, then check: a straggler of a batch committed meanwhile keeps nothing.
            sink.committer.abort_task(task)
            return OutcommitStreamMessage(BatchTaskResult(identity, None, note="committed meanwhile"))
        return OutcommitStreamMessage(BatchTaskResult(identity, job.job_id, result))

    # -- micro-batch (driver) ------------------------------------------------------------------
    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        _driver_logging()
        results = [m.result for m in messages if isinstance(m, OutcommitStreamMessage)]
        outcome = self._sink().commit_batch(batchId, results)
        entry = outcome.entry
        if outcome.replayed:
            log.info("batch %d of %s was committed before (job %s): replay discarded",
                     batchId, self.plan.write.destination, entry.job_id)
        else:
            log.info("batch %d committed to %s: %d files, %d rows%s", batchId,
                     self.plan.write.destination, len(entry.files), entry.rows,
                     f"; rolled back {', '.join(outcome.rolled_back)}" if outcome.rolled_back else "")

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        _driver_logging()
        results = [m.result for m in messages if isinstance(m, OutcommitStreamMessage)]
        try:
            rolled_back = self._sink().abort_batch(batchId, results)
            log.warning("batch %d to %s failed: rolled back %s", batchId, self.plan.write.destination,
                        ", ".join(rolled_back) or "nothing")
        except Exception:  # abort never raises: Spark is already reporting the real failure
            log.warning("abort of batch %d failed", batchId, exc_info=True)
