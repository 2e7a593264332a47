"""The ``outcommit`` Python data source (PySpark >= 4.0): writes, and reads back
(:mod:`outcommit.spark.reader`) exactly the committed files.

Where each piece of a write runs: ``writer()`` in a Python process of the Spark driver (job setup);
``write()`` in a Python worker per task attempt (write, task commit, message back);
``commit()``/``abort()`` in a Python process of the driver again, with the messages of
the attempts Spark accepted. Those are different processes, so every step recreates its
committer from the pickled :class:`WritePlan`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from ..committer import Committer
from ..context import JobContext
from ..engine.tasks import commit_accepted_attempts, commits_on_executor
from ..errors import InjectedFailure, OptionError, OutcommitError
from ..factory import create_committer, shared_store
from ..success import SuccessData
from .logs import driver_logging as _driver_logging
from .logs import reported_to_spark
from .options import WritePlan, build_plan
from .session import SessionSnapshot

log = logging.getLogger("outcommit.spark")


@dataclass
class OutcommitCommitMessage(WriterCommitMessage):
    """What one committed task attempt sends to the driver."""

    task_index: int
    attempt: int
    task_message: dict[str, Any] | None
    #: The attempt wrote output that the driver must commit (committers whose task commit
    #: is not isolated: see ``outcommit.engine.tasks``).
    commit_on_driver: bool = False
    rows: int = 0
    files: int = 0
    bytes: int = 0
    paths: list[str] = field(default_factory=list)
    #: The Python worker's peak resident memory when the task finished (bytes).
    peak_rss: int = 0


def _peak_rss() -> int:
    """This process's peak resident memory in bytes (Linux: ru_maxrss is in KiB)."""
    import resource

    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


class OutcommitDataSource(DataSource):
    """``df.write.format("outcommit").mode("append"|"overwrite").save(url)`` and
    ``spark.read.format("outcommit").load(url)``."""

    #: Session config captured by ``register(spark)`` (the driver-side processes of a
    #: Python data source have no SparkSession to ask).
    spark_conf: ClassVar[dict[str, str]] = {}
    #: The Spark SQL settings the reader follows (time zone, partition type inference,
    #: filter pushdown), as ``register(spark)`` read them.
    sql_conf: ClassVar[dict[str, str]] = {}
    #: False for the class Spark finds by itself (``pyspark_outcommit``): no session config.
    registered: ClassVar[bool] = False
    #: Registered through Spark Connect (which hides secret-looking keys from clients).
    through_connect: ClassVar[bool] = False

    @classmethod
    def name(cls) -> str:
        return "outcommit"

    def session(self) -> SessionSnapshot:
        return SessionSnapshot(dict(self.spark_conf), self.registered, self.through_connect)

    # -- writing ---------------------------------------------------------------------------------
    def writer(self, schema: StructType, overwrite: bool) -> OutcommitWriter:
        with reported_to_spark("job setup"):
            plan = build_plan(self.options, overwrite, self.spark_conf)
            return OutcommitWriter(plan, schema, self.session())

    def streamWriter(self, schema: StructType, overwrite: bool) -> Any:
        """``df.writeStream.format("outcommit")``: see :mod:`outcommit.spark.streaming`."""
        from .options import build_stream_plan
        from .streaming import OutcommitStreamWriter

        with reported_to_spark("stream setup"):
            plan = build_stream_plan(self.options, overwrite, self.spark_conf)
            check_partition_columns(plan.write, schema)
            # The tasks compare the running session with it, as a batch write's do.
            return OutcommitStreamWriter(plan, self.session())

    # -- reading ---------------------------------------------------------------------------------
    def schema(self) -> StructType:
        """The columns of the committed files (run when the read gives no ``.schema()``):
        the listing travels, pickled with this object, to ``reader()``."""
        from .options import build_read_plan
        from .reader import infer_schema, list_committed

        with reported_to_spark("read setup"):
            plan = build_read_plan(self.options, self.spark_conf, self.sql_conf)
            listing = list_committed(plan)
            schema = infer_schema(plan, listing)
            self._listing, self._inferred = listing, schema
            return schema

    def reader(self, schema: StructType) -> Any:
        from .options import build_read_plan
        from .reader import OutcommitReader, PruningReader, list_committed

        with reported_to_spark("read planning"):
            plan = build_read_plan(self.options, self.spark_conf, self.sql_conf)
            # Taken off this object: Spark pickles it into every task of the read.
            listing = self.__dict__.pop("_listing", None)
            if listing is None or self.__dict__.pop("_inferred", None) != schema:
                listing = list_committed(plan, {f.name: f.dataType for f in schema.fields})
            reader_class = PruningReader if plan.filter_pushdown else OutcommitReader
            return reader_class(plan, listing, schema, self.session())


def check_partition_columns(plan: WritePlan, schema: StructType) -> None:
    missing = [c for c in plan.partition_by if c not in schema.fieldNames()]
    if missing:
        raise OptionError(f"partitionBy names columns the data does not have: {', '.join(missing)} "
                          f"(columns: {', '.join(schema.fieldNames())})")
    if plan.partition_by and len(plan.partition_by) == len(schema.fieldNames()):
        raise OptionError("partitionBy names every column: no data would be left in the files")
    from pyspark.sql.types import AtomicType, BinaryType

    for column in plan.partition_by:
        data_type = schema[column].dataType
        if not isinstance(data_type, AtomicType):
            problem = "Spark refuses it for a partition column (INVALID_PARTITION_COLUMN_DATA_TYPE)"
        elif isinstance(data_type, BinaryType):
            problem = "outcommit cannot name a directory after binary values"
        else:
            continue
        raise OptionError(f"cannot use {data_type.simpleString()} for partition column {column!r}: "
                          f"{problem}; partition by atomic columns (strings, numbers, booleans, "
                          "dates, timestamps, decimals)")


def _arrow_schema(schema: StructType) -> Any:
    """The Arrow schema of the batches Spark hands over (task 0's file when it got no rows:
    see :class:`~outcommit.engine.writer.StreamingWriter`); None if Arrow has no such type."""
    from pyspark.sql.pandas.types import to_arrow_schema

    try:
        return to_arrow_schema(schema, timezone="UTC")
    except Exception:  # a type Spark's Arrow conversion lacks: no schema-only file
        log.debug("no Arrow schema for %s", schema.simpleString(), exc_info=True)
        return None


class OutcommitWriter(DataSourceArrowWriter):
    """Created on the driver (job setup); pickled to every task attempt."""

    def __init__(self, plan: WritePlan, schema: StructType, session: SessionSnapshot | None = None) -> None:
        check_partition_columns(plan, schema)
        self.session = session
        # Created here first: an unknown or unsafe committer fails before any task runs.
        committer = create_committer(plan.destination, plan.config, plan.committer)
        committer.conflict_source = plan.conflict_reason  # the option or save mode, not the plan's key
        job = plan.job_context()
        self.plan = plan
        self.schema = schema
        self.committer_name = committer.name
        self.selection = committer.selection
        self.job = job.to_dict()
        self.started = time.time()
        committer.setup_job(job)
        _driver_logging()
        log.info("job %s: writing %s with committer %s (%s); conflict mode %s (%s)",
                 job.job_id, plan.destination, committer.name, committer.selection,
                 plan.conflict_mode, plan.conflict_reason)

    def _committer(self) -> tuple[Committer, JobContext]:
        committer = create_committer(self.plan.destination, self.plan.config, self.committer_name,
                                     store=shared_store(self.plan.destination, self.plan.config))
        committer.selection = self.selection
        committer.conflict_source = self.plan.conflict_reason
        return committer, JobContext.from_dict(self.job)

    # -- task attempt (executor) ---------------------------------------------------
    def write(self, iterator: Iterator[Any]) -> OutcommitCommitMessage:
        with reported_to_spark("task attempt"):
            return self._write(iterator)

    def _write(self, iterator: Iterator[Any]) -> OutcommitCommitMessage:
        from pyspark import TaskContext

        from ..engine.writer import StreamingWriter

        context = TaskContext.get()
        if context is None:
            raise OutcommitError("OutcommitWriter.write runs only inside a Spark task")
        if self.session is not None:  # before anything is written: the job was set up with it
            self.session.check(context.getLocalProperty, self.plan.option_keys)
        index, attempt = context.partitionId(), context.attemptNumber()
        committer, job = self._committer()
        task = job.task_attempt(index, attempt)
        plan = self.plan
        fail_now = plan.fail_task_once == index and attempt == 0

        def fail_mid_write(seq: int, relative: str) -> None:
            if fail_now and seq >= 1:
                raise InjectedFailure(f"injected failure: task {index} attempt {attempt} "
                                      f"dies after writing {seq} file(s) (test hook _failTaskOnce)")

        committer.setup_task(task)
        writer = StreamingWriter(
            committer.filesystem(task), committer.work_path(task), index, job.job_id, attempt,
            plan.fmt, plan.partition_by, max_rows_per_file=plan.max_rows_per_file,
            max_bytes_per_file=plan.max_bytes_per_file, options=dict(plan.file_options),
            on_file=fail_mid_write, schema=_arrow_schema(self.schema) if index == 0 else None)
        try:
            # Batches as Spark hands them over: the partition is never held in memory.
            for batch in iterator:
                writer.write_batch(batch)
            if fail_now:
                fail_mid_write(writer._seq + 1, "")
            written = writer.close()
            # An attempt that wrote files must commit; asking the store first costs a listing.
            needs_commit = bool(written) or committer.needs_task_commit(task)
            # Spark's commit coordinator has not chosen this attempt yet: only an isolated
            # task commit is safe here; the driver commits the others once accepted.
            on_executor = commits_on_executor(committer)
            message = committer.commit_task(task) if needs_commit and on_executor else None
        except InjectedFailure:
            raise  # a killed attempt cleans nothing up: job commit/abort must
        except BaseException:
            writer.abort()
            committer.abort_task(task)
            raise
        return OutcommitCommitMessage(
            task_index=index, attempt=attempt, task_message=message,
            commit_on_driver=needs_commit and not on_executor,
            rows=sum(w.rows for w in written), files=len(written),
            bytes=sum(w.bytes for w in written), paths=[w.path for w in written],
            peak_rss=_peak_rss())

    # -- job (driver) ----------------------------------------------------------------
    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        with reported_to_spark("job commit"):
            self._commit(messages)

    def _commit(self, messages: list[WriterCommitMessage | None]) -> None:
        _driver_logging()
        committer, job = self._committer()
        accepted = [m for m in messages if isinstance(m, OutcommitCommitMessage)]
        stats = {"rows.written": sum(m.rows for m in accepted),
                 "files.written": sum(m.files for m in accepted),
                 "bytes.written": sum(m.bytes for m in accepted),
                 "spark.task.peak-rss.max": max((m.peak_rss for m in accepted), default=0),
                 "spark.tasks": len(messages),
                 "spark.task.retries": sum(1 for m in accepted if m.attempt > 0)}
        committer.reports.add_metrics(stats)
        accepted.sort(key=lambda m: m.task_index)
        try:
            on_driver = commit_accepted_attempts(
                committer, job, [(m.task_index, m.attempt) for m in accepted if m.commit_on_driver])
            task_messages: list[Mapping[str, Any]] = [
                m.task_message for m in accepted if m.task_message is not None]
            task_messages += on_driver
            summary: SuccessData = committer.commit_job(job, task_messages)
        except BaseException:
            log.error("job %s: job commit to %s failed", job.job_id, self.plan.destination)
            raise
        log.info("job %s: committed %s with %s: %d files, %d bytes, %d rows from %d tasks "
                 "(%d retried) in %.1f s", job.job_id, self.plan.destination, committer.name,
                 stats["files.written"], stats["bytes.written"], stats["rows.written"],
                 stats["spark.tasks"], stats["spark.task.retries"], time.time() - self.started)
        log.debug("job %s: _SUCCESS metrics %s", job.job_id, summary.metrics)  # details: DEBUG

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        _driver_logging()
        try:
            committer, job = self._committer()
            log.warning("job %s: aborting the write to %s (%d of %d tasks had committed)",
                        job.job_id, self.plan.destination,
                        sum(1 for m in messages if m is not None), len(messages))
            # Removes the job's whole temporary area and, on multipart stores, every pending
            # upload under the destination: also the leftovers of attempts that reported nothing.
            committer.abort_job(job)
            committer.cleanup_job(job)
        except Exception:  # abort never raises: Spark is already reporting the real failure
            log.warning("abort of job %s failed", self.job.get("jobId"), exc_info=True)
