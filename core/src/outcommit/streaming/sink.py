"""Exactly-once micro-batches: each batch one job, committed once per batch id.

Engine-neutral: the Structured Streaming sink (``outcommit.spark.streaming``) drives it,
and so can any engine that replays a batch under the same id after a restart.

Identity. A batch's job id is derived from the query id, the batch id and the run
(``<queryId>-b<batchId>-r<run>``): every task of one run of a batch finds the same job
without asking the driver, and a replay of the batch after a restart is a different job
of the same batch, whose work areas never meet the dead run's.

Task side (:meth:`StreamingSink.begin_task`). A task first looks the batch up in the
log: a committed batch is a replay, and the task writes nothing. Otherwise it checks
that the log belongs to its query (``_query.json``, claimed by the first task ever: one
query per destination), records the job in ``_outcommit_log/_jobs/`` and sets the job up
(idempotent: the first task of the run does the work); then it writes and, where the
committer allows, commits as any task attempt (``outcommit.engine.tasks``). After
writing it checks the log again (write, then check): a straggler of a batch committed
meanwhile throws its output away.

Driver side (:meth:`StreamingSink.commit_batch`), with the accepted attempts' results:

1. batch already in the log: a replay. Nothing new becomes visible; the replay's jobs
   are rolled back (their uploads with them) and the log entry is returned.
2. every other job of this query recorded for this batch or an earlier one (a run that
   died, a straggler, a run that lost its lease and runs on) is settled (``_settle``),
   through the committer that made it (the record names it): rolled back — ``abort_job``
   + ``cleanup_job``, and the files its commit had announced deleted (of them only
   those named with the job's id that no committed batch names, never the log's own
   files: a record is evidence, not an order) — but only once that job can no longer
   create its batch's entry: another job's entry is there, or the rollback's "abort"
   decision (``_jobs/<jobId>.decision``, created exclusively) stands. A job whose own
   driver decided "commit" first has all its files visible: the rollback logs it (the
   exclusive entry decides) and this batch becomes a replay.
3. the accepted attempts waiting for the driver are committed, the files about to be
   published are recorded with the job, the job is committed (``_SUCCESS`` off: the log
   entry is the batch's report), the job's "commit" decision is created — a driver that
   meets a rollback's "abort" there deletes what it published and fails
   (:class:`BatchRolledBack`) — and the batch's entry is created exclusively: the
   commit point. The job's record and decision go last, in one request.

An interrupted commit is rolled back unless it had decided to commit: before its entry
exists a batch is not committed, the source replays the same offsets under the same
batch id after a restart, and step 2 removes everything the dead commit had made
visible (or logs it, when every file was visible and decided). An entry is written only
after the job commit returned, and a rollback deletes nothing a live driver could still
log, so the log never names a missing file.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..committer import Committer
from ..config import Config
from ..context import JobContext
from ..engine.tasks import AttemptResult, job_messages
from ..errors import CommitError
from ..factory import create_committer, open_store
from ..store import Store
from .log import DEFAULT_COMPACT_INTERVAL, BatchAlreadyCommitted, BatchLog, BatchLogError
from .records import ABORT, COMMIT, BatchEntry, CommittedFile, Decision, JobRecord, entry_for
from .settle import Settler
from .spark_metadata import SparkMetadata

log = logging.getLogger("outcommit.streaming")

SUCCESS_KEY = "outcommit.success.enabled"
JOB_ID_SOURCE = "streaming query, batch and run"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


class BatchRolledBack(BatchLogError):
    """This run's job of a batch was rolled back by another run while it committed it."""


@dataclass(frozen=True)
class BatchIdentity:
    """Which query, micro-batch and run (restart) a task or commit belongs to."""

    query_id: str
    batch_id: int
    run_id: str

    def job_id(self) -> str:
        query = _UNSAFE.sub("_", self.query_id)[:80]
        run = _UNSAFE.sub("_", self.run_id)[:8]
        return f"{query}-b{self.batch_id}-r{run}"


@dataclass
class BatchTaskResult:
    """What one task of a micro-batch reports to the driver."""

    identity: BatchIdentity
    job_id: str | None           # None: the batch was committed already; nothing written
    attempt: AttemptResult | None = None
    note: str = ""

    @property
    def skipped(self) -> bool:
        return self.attempt is None


@dataclass
class BatchOutcome:
    """What ``commit_batch`` did: the entry, and whether the batch was a replay."""

    entry: BatchEntry
    replayed: bool
    rolled_back: list[str] = field(default_factory=list)


class StreamingSink:
    """The micro-batch commits of one destination through one committer."""

    def __init__(self, destination: str, config: Mapping[str, Any] | Config | None = None,
                 committer: str | None = None, *, compact_interval: int = DEFAULT_COMPACT_INTERVAL,
                 store: Store | None = None,
                 on_step: Callable[[str, int], None] | None = None, spark_metadata: bool = True) -> None:
        cfg = dict(config.to_dict() if isinstance(config, Config) else (config or {}))
        # One _SUCCESS per micro-batch at the destination's root would be overwritten every
        # batch: the log entry is the batch's report (an explicit setting wins).
        if not any(Config({k: v}).get_str(SUCCESS_KEY) is not None for k, v in cfg.items()):
            cfg[SUCCESS_KEY] = "false"
        self.destination = destination
        self.config = cfg
        self.store = store or open_store(destination, cfg)
        self.committer: Committer = create_committer(destination, cfg, committer, store=self.store)
        self.log = BatchLog(self.store, self.committer.dest, compact_interval)
        #: Spark's log of the committed batches, for Spark's own readers (None: not kept).
        self.spark_metadata = SparkMetadata(self.store, self.committer.dest, compact_interval,
                                            destination) \
            if spark_metadata else None
        self.settler = Settler(self.log, self.committer, self.config, self.destination, self.job,
                               logged=self._mirror)
        #: Called as ``on_step(step, batch_id)`` at "job-committed" (files visible, no
        #: decision yet), "decided" (decided to commit, no log entry yet) and "logged"
        #: (entry written, job record not yet removed): tests stop a driver there.
        self.on_step = on_step or (lambda _step, _batch: None)

    def job(self, job_id: str) -> JobContext:
        return JobContext(self.destination, job_id, 0, self.committer.config, job_id_source=JOB_ID_SOURCE,
                          task_messages=True)

    # -- task side ------------------------------------------------------------------------------
    def begin_task(self, identity: BatchIdentity) -> JobContext | None:
        """The batch's job, set up; None when the batch is committed already (write nothing)."""
        entry = self.log.get(identity.batch_id)
        if entry is not None:
            self._check_query(entry, identity.query_id)
            return None
        # Before anything is recorded or written: a second query on this destination is refused
        # here (its commit would roll back this query's jobs), and its driver knows it from that.
        self.log.claim(identity.query_id)
        job = self.job(identity.job_id())
        # Recorded before anything of the job exists: a restart finds every job to roll back.
        self.log.register_job(JobRecord(job.job_id, identity.batch_id, identity.query_id,
                                        identity.run_id, self.committer.name))
        self.committer.setup_job(job)  # every task: idempotent, and no task may run before it
        return job

    def committed_meanwhile(self, identity: BatchIdentity, job_id: str) -> bool:
        """Write, then check: was the batch committed (by another job) while this task wrote?"""
        entry = self.log.get(identity.batch_id)
        return entry is not None and entry.job_id != job_id

    # -- driver side ------------------------------------------------------------------------------
    def commit_batch(self, batch_id: int, results: Sequence[BatchTaskResult],
                     query_id: str | None = None) -> BatchOutcome:
        """Commit batch ``batch_id`` from its accepted task results, exactly once."""
        query_id = query_id or next((r.identity.query_id for r in results), "")
        jobs = sorted({r.job_id for r in results if r.job_id is not None})
        existing = self.log.get(batch_id)
        rolled_back: list[str] = []
        if existing is None:
            if len(jobs) > 1:
                raise CommitError(f"batch {batch_id}: tasks of several jobs ({', '.join(jobs)}) in one "
                                  "micro-batch: one run of one query per destination")
            records, orphans = self.log.job_states()
            self._check_owner(query_id, records, jobs)
            keep = jobs[0] if jobs else None
            rolled_back, existing = self.settler.settle_all(records, orphans, batch_id, query_id, keep,
                                                     by=keep or f"the commit of batch {batch_id}")
        if existing is not None:
            return self._replayed(existing, query_id, jobs, rolled_back)
        # Before anything is published: Spark's log must not have this batch from another writer.
        listing = None if self.spark_metadata is None else \
            self.spark_metadata.check_free(batch_id, lambda b: self.log.get(b) is not None)
        if not jobs:  # no task wrote (no partitions): the batch is committed all the same
            entry = entry_for(batch_id, query_id, None, self.committer.name, [])
            self.log.commit(entry)
            self._mirror(entry, listing)
            self.settler.delete_decisions(self.settler.lifted_fences(batch_id))
            return BatchOutcome(entry, False, rolled_back)
        entry = self._commit_job(batch_id, query_id, jobs[0], results, listing)
        return BatchOutcome(entry, False, rolled_back)

    def _mirror(self, entry: BatchEntry, listing: Mapping[int, str] | None = None) -> None:
        """Spark's log through ``entry``, the batch log's entry of its batch (only ever from
        the log: a run fenced off never has an entry to copy)."""
        if self.spark_metadata is not None:
            self.spark_metadata.sync(entry, self.log.entries, listing)

    def _replayed(self, existing: BatchEntry, query_id: str, jobs: Sequence[str],
                  rolled_back: list[str]) -> BatchOutcome:
        """The batch has its entry (a replay, or a rollback finished another job's commit of
        it): nothing of this call becomes visible; its jobs are rolled back."""
        batch_id = existing.batch_id
        self._check_query(existing, query_id)
        log.warning("batch %d is already committed to %s (job %s): the replay (jobs %s) is "
                    "discarded", batch_id, self.destination, existing.job_id, ", ".join(jobs) or "none")
        records, orphans = self.log.job_states()
        recorded = {r.job_id for r in records}
        for job_id in jobs:
            if job_id != existing.job_id and job_id not in recorded:
                self.settler.abort(self.committer, self.job(job_id))  # never recorded: nothing published
        more, _ = self.settler.settle_all(records, orphans, batch_id, query_id, keep=None,
                                   by=f"the replay of batch {batch_id}")
        self.settler.delete_decisions(self.settler.lifted_fences(batch_id))
        # The run that logged it may have died before Spark's log had it: written now.
        self._mirror(existing)
        return BatchOutcome(existing, True, [*rolled_back, *(j for j in more if j not in rolled_back)])

    def _commit_job(self, batch_id: int, query_id: str, job_id: str,
                    results: Sequence[BatchTaskResult], listing: Mapping[int, str] | None) -> BatchEntry:
        started = time.monotonic()
        committer, job = self.committer, self.job(job_id)
        attempts = [r.attempt for r in results if r.attempt is not None]
        files = [CommittedFile(w.path, w.bytes, w.rows) for a in attempts for w in a.files]
        paths = [f.path for f in files]
        if len(set(paths)) != len(paths):
            raise CommitError(f"batch {batch_id}: two accepted attempts wrote the same file")
        run_id = next((r.identity.run_id for r in results if r.job_id == job_id), "")
        record = JobRecord(job_id, batch_id, query_id, run_id, committer.name, tuple(files))
        # Before anything is published (v2 publishes at task commit, on the driver below):
        # what a rollback must delete if this commit dies.
        self.log.save_job_files(record)
        try:
            messages = job_messages(committer, job, attempts)
            committer.reports.add_metrics({"rows.written": sum(a.rows for a in attempts),
                                           "files.written": len(files),
                                           "bytes.written": sum(a.bytes for a in attempts)})
            summary = committer.commit_job(job, messages)
        except Exception as exc:
            # Its job aborted under it ("not active") is how a rollback by another run shows here.
            fenced = self.log.decision(job_id)
            if fenced is not None and fenced.outcome == ABORT:
                raise self._rolled_back(record, fenced) from exc
            won = self.log.get(batch_id)
            if won is not None and won.job_id != job_id:  # another run committed it meanwhile
                self.settler.roll_back(record)
                raise BatchAlreadyCommitted(f"batch {batch_id} was committed to {self.destination} by "
                                            f"job {won.job_id} while this run committed it") from exc
            raise
        self.on_step("job-committed", batch_id)
        # Every file is visible now: decide to commit, unless a rollback decided first (this
        # driver lost its lease to a restarted run, which deleted or is deleting our files).
        decision = self.log.decide(job_id, batch_id, COMMIT, by=job_id)
        if decision.outcome != COMMIT:
            raise self._rolled_back(record, decision)
        self.on_step("decided", batch_id)
        metrics = {k: v for k, v in summary.metrics.items() if isinstance(v, int)}
        metrics["tasks"] = len(attempts)
        metrics["task.retries"] = sum(1 for a in attempts if a.attempt > 0)
        metrics["commit.duration.ms"] = int((time.monotonic() - started) * 1000)
        entry = entry_for(batch_id, query_id, job_id, committer.name, files, metrics)
        try:
            self.log.commit(entry)  # the commit point
        except BatchAlreadyCommitted:
            # Another job's entry stands (its own driver's, or a rollback finished it): ours goes.
            self.settler.roll_back(record)
            raise
        self.on_step("logged", batch_id)
        self._mirror(entry, listing)
        self.settler.forget(job_id, also=self.settler.lifted_fences(batch_id))
        log.info("committed batch %d to %s: job %s, %d files, %d rows", batch_id, self.destination,
                 job_id, len(files), entry.rows)
        return entry

    def _rolled_back(self, record: JobRecord, decision: Decision) -> BatchRolledBack:
        """Our job was fenced off by a rollback: delete what we published after it, say so."""
        self.settler.roll_back(record, keep_decision=True)
        return BatchRolledBack(
            f"batch {record.batch_id}'s job {record.job_id} was rolled back by "
            f"{decision.by or 'another run'} while this run committed it to {self.destination}: "
            f"another driver runs query {record.query_id} (this one lost its lease?); this run's "
            "output is deleted and the batch is the other run's to commit")

    def abort_batch(self, batch_id: int, results: Sequence[BatchTaskResult],
                    query_id: str | None = None) -> list[str]:
        """A batch failed: settle every job of it that the log does not name as committed.

        Only jobs of this query: without a query id (no task reported one) only the
        results' jobs; the batch's other records wait for the query's restart.
        """
        query_id = query_id or next((r.identity.query_id for r in results), "")
        jobs = {r.job_id for r in results if r.job_id is not None}
        records, orphans = self.log.job_states()
        recorded = {r.job_id for r in records}
        committed = self.log.get(batch_id)
        for job_id in sorted(jobs - recorded):  # never recorded: nothing published
            if committed is None or committed.job_id != job_id:
                self.settler.abort(self.committer, self.job(job_id))
        mine = [r for r in records if r.batch_id == batch_id and
                (r.job_id in jobs or (query_id and r.query_id == query_id))]
        handled, _ = self.settler.settle_all(mine, orphans, batch_id, query_id, keep=None,
                                      by=f"the abort of batch {batch_id}")
        return handled

    # -- rolling back ------------------------------------------------------------------------------
    def roll_back_others(self, batch_id: int, keep: str | None, only_batch: bool = False,
                         query_id: str = "") -> list[str]:
        """Settle the recorded jobs of batches up to ``batch_id`` except ``keep``: roll back
        each one the log does not name as committed (see :meth:`Settler.settle`)."""
        records, orphans = self.log.job_states()
        if only_batch:
            records = [r for r in records if r.batch_id == batch_id]
        handled, _ = self.settler.settle_all(records, orphans, batch_id, query_id, keep,
                                      by=keep or f"a rollback up to batch {batch_id}")
        return handled

    def _check_owner(self, query_id: str, records: Sequence[JobRecord], jobs: Sequence[str]) -> None:
        """Refuse to commit into another query's log. Free when this batch has a job: its
        tasks claimed the log before they recorded it (a claim never changes hands)."""
        own = [r for r in records if r.job_id in jobs]
        if own and all(r.query_id == query_id for r in own) and len(own) == len(jobs):
            return
        if query_id:
            self.log.claim(query_id)

    @staticmethod
    def _check_query(entry: BatchEntry, query_id: str) -> None:
        if entry.query_id and query_id and entry.query_id != query_id:
            raise BatchLogError(
                f"batch {entry.batch_id} of this destination was committed by query {entry.query_id}, "
                f"not by query {query_id}: one streaming query per destination (a new checkpoint "
                "location needs a new destination, as with Spark's file sink)")


__all__ = ["BatchIdentity", "BatchOutcome", "BatchRolledBack", "BatchTaskResult", "StreamingSink"]
