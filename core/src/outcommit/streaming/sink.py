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
from ..errors import CommitError, CorruptFileError, OutcommitError
from ..factory import create_committer, open_store
from ..store import Store
from .log import (
    ABORT,
    COMMIT,
    DEFAULT_COMPACT_INTERVAL,
    LOG_DIR,
    BatchAlreadyCommitted,
    BatchEntry,
    BatchLog,
    BatchLogError,
    CommittedFile,
    Decision,
    JobRecord,
    entry_for,
)

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
                 on_step: Callable[[str, int], None] | None = None) -> None:
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
        #: The committers, by name, that made the jobs a rollback meets (a restart may change it).
        self._committers: dict[str, Committer] = {}
        #: The "abort" decisions this sink won and must keep until their batch is logged: job -> batch.
        self._fences: dict[str, int] = {}
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
            rolled_back, existing = self._settle_all(records, orphans, batch_id, query_id, keep,
                                                     by=keep or f"the commit of batch {batch_id}")
        if existing is not None:
            return self._replayed(existing, query_id, jobs, rolled_back)
        if not jobs:  # no task wrote (no partitions): the batch is committed all the same
            entry = entry_for(batch_id, query_id, None, self.committer.name, [])
            self.log.commit(entry)
            self._delete_decisions(self._lifted_fences(batch_id))
            return BatchOutcome(entry, False, rolled_back)
        return BatchOutcome(self._commit_job(batch_id, query_id, jobs[0], results), False, rolled_back)

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
                self._abort(self.committer, self.job(job_id))  # never recorded: nothing published
        more, _ = self._settle_all(records, orphans, batch_id, query_id, keep=None,
                                   by=f"the replay of batch {batch_id}")
        self._delete_decisions(self._lifted_fences(batch_id))
        return BatchOutcome(existing, True, [*rolled_back, *(j for j in more if j not in rolled_back)])

    def _commit_job(self, batch_id: int, query_id: str, job_id: str,
                    results: Sequence[BatchTaskResult]) -> BatchEntry:
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
            committer.add_metrics({"rows.written": sum(a.rows for a in attempts), "files.written": len(files),
                                   "bytes.written": sum(a.bytes for a in attempts)})
            summary = committer.commit_job(job, messages)
        except Exception as exc:
            # Its job aborted under it ("not active") is how a rollback by another run shows here.
            fenced = self.log.decision(job_id)
            if fenced is not None and fenced.outcome == ABORT:
                raise self._rolled_back(record, fenced) from exc
            won = self.log.get(batch_id)
            if won is not None and won.job_id != job_id:  # another run committed it meanwhile
                self._roll_back(record)
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
            self._roll_back(record)
            raise
        self.on_step("logged", batch_id)
        self._forget(job_id, also=self._lifted_fences(batch_id))
        log.info("committed batch %d to %s: job %s, %d files, %d rows", batch_id, self.destination,
                 job_id, len(files), entry.rows)
        return entry

    def _rolled_back(self, record: JobRecord, decision: Decision) -> BatchRolledBack:
        """Our job was fenced off by a rollback: delete what we published after it, say so."""
        self._roll_back(record, keep_decision=True)
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
                self._abort(self.committer, self.job(job_id))
        mine = [r for r in records if r.batch_id == batch_id and
                (r.job_id in jobs or (query_id and r.query_id == query_id))]
        handled, _ = self._settle_all(mine, orphans, batch_id, query_id, keep=None,
                                      by=f"the abort of batch {batch_id}")
        return handled

    # -- rolling back ------------------------------------------------------------------------------
    def roll_back_others(self, batch_id: int, keep: str | None, only_batch: bool = False,
                         query_id: str = "") -> list[str]:
        """Settle the recorded jobs of batches up to ``batch_id`` except ``keep``: roll back
        each one the log does not name as committed (see :meth:`_settle`)."""
        records, orphans = self.log.job_states()
        if only_batch:
            records = [r for r in records if r.batch_id == batch_id]
        handled, _ = self._settle_all(records, orphans, batch_id, query_id, keep,
                                      by=keep or f"a rollback up to batch {batch_id}")
        return handled

    def _settle_all(self, records: Sequence[JobRecord], orphans: Sequence[str], batch_id: int,
                    query_id: str, keep: str | None, by: str) -> tuple[list[str], BatchEntry | None]:
        """Settle the records of batches up to ``batch_id`` but ``keep`` and another query's.

        Returns the jobs handled, and the entry of ``batch_id`` if settling created it
        (a job of it had decided to commit: the batch is then a replay).
        """
        handled, entry = [], None
        for record in records:
            if record.job_id == keep or record.batch_id > batch_id:
                continue
            if query_id and record.query_id and record.query_id != query_id:
                # Never another query's: its driver may be committing it right now.
                log.warning("not rolling back job %s of batch %d at %s: it belongs to query %s, not %s",
                            record.job_id, record.batch_id, self.destination, record.query_id, query_id)
                continue
            settled = self._settle(record, by)
            if settled is not None and settled.batch_id == batch_id:
                entry = settled
            handled.append(record.job_id)
        self._collect_decisions(orphans, batch_id)
        return handled, entry

    def _settle(self, record: JobRecord, by: str) -> BatchEntry | None:
        """Roll ``record``'s job back, or find it committed: the entry that names it, or None.

        A rollback deletes only files whose job can no longer win its batch's entry: the
        batch has another job's entry, or the rollback's "abort" decision stands. Where the
        job's driver decided "commit" first, every file of the job is visible and its record
        names them: the rollback finishes that commit (creates the entry naming them; the
        exclusive entry decides) instead of deleting what may be logged a moment later.
        """
        entry = self.log.get(record.batch_id)
        if entry is None:
            decision = self.log.decide(record.job_id, record.batch_id, ABORT, by=by)
            if decision.outcome == COMMIT:
                entry = self._finish(record)
            else:
                # Fenced. Its driver deletes its decision only after its entry exists: look again.
                entry = self.log.get(record.batch_id)
                if entry is None:
                    self._roll_back(record, keep_decision=True)
                    self._fences[record.job_id] = record.batch_id
                    return None
        if entry.job_id != record.job_id:
            self._roll_back(record)  # another job's entry stands: this one can never win
            return None
        self._cleanup(self._committer_for(record), self.job(record.job_id))
        self._forget(record.job_id)
        return entry

    def _finish(self, record: JobRecord) -> BatchEntry:
        """Create the entry of a job whose driver decided to commit: the batch's entry after."""
        if record.files is None:
            raise BatchLogError(f"job {record.job_id} of batch {record.batch_id} decided to commit and "
                                f"its record {self.store.url(self.log.job_path(record.job_id))} names no "
                                "files: it was changed by hand; inspect it (nothing was deleted)")
        entry = entry_for(record.batch_id, record.query_id, record.job_id,
                          record.committer or self.committer.name, record.files)
        try:
            self.log.commit(entry)
        except BatchAlreadyCommitted:
            found = self.log.get(record.batch_id)
            if found is None:
                raise
            return found
        log.warning("finished the commit of job %s (batch %d, run %s) at %s: its driver decided to "
                    "commit and had not logged it", record.job_id, record.batch_id, record.run_id,
                    self.destination)
        return entry

    def _roll_back(self, record: JobRecord, keep_decision: bool = False) -> None:
        """Abort the job through the committer that made it, delete the files it published."""
        log.warning("rolling back job %s of batch %d (run %s) at %s: it never reached the batch log",
                    record.job_id, record.batch_id, record.run_id, self.destination)
        self._abort(self._committer_for(record), self.job(record.job_id))
        doomed = self._deletable(record)
        if doomed:
            # In batches where the store has them, else the committer's threads at once: a
            # rolled back batch of 1,000 files was 1,000 deletes one after another.
            try:
                self.store.delete_files(doomed, threads=self.committer.threads)
            except Exception:
                log.warning("could not delete the %d files of the rolled back job %s under %s",
                            len(doomed), record.job_id, self.destination, exc_info=True)
                raise
        self._forget(record.job_id, decision=not keep_decision)

    def _lifted_fences(self, batch_id: int) -> list[str]:
        """The decisions of the jobs this sink fenced off from ``batch_id``, which is logged
        now: no driver of theirs can create its entry any more."""
        lifted = [job_id for job_id, batch in self._fences.items() if batch == batch_id]
        for job_id in lifted:
            del self._fences[job_id]
        return [self.log.decision_path(job_id) for job_id in lifted]

    def _delete_decisions(self, paths: Sequence[str]) -> None:
        if not paths:
            return
        try:
            self.store.delete_files(list(paths))
        except Exception:  # a leftover decision is collected by a later commit
            log.warning("could not delete %d settled decisions at %s", len(paths), self.destination,
                        exc_info=True)

    def _collect_decisions(self, orphans: Sequence[str], batch_id: int) -> None:
        """Delete the decisions of settled jobs (no record) whose batch has its entry now:
        only then can no driver of theirs create one. Those of ``batch_id`` go with this
        commit's own, once its entry is there (the query's last batch leaves none)."""
        doomed = []
        for job_id in orphans:
            try:
                decision = self.log.decision(job_id)
            except CorruptFileError:
                log.warning("not deleting the unreadable decision of job %s at %s", job_id,
                            self.destination, exc_info=True)
                continue
            if decision is None:
                continue
            if self.log.get(decision.batch_id) is not None:
                doomed.append(self.log.decision_path(job_id))
            elif decision.batch_id == batch_id:
                self._fences[job_id] = batch_id
        self._delete_decisions(doomed)

    def _committer_for(self, record: JobRecord) -> Committer:
        """The committer that made ``record``'s job (a restart may have changed the query's):
        aborting a magic job through the directory committer left its state and uploads."""
        name = record.committer or self.committer.name
        if name == self.committer.name:
            return self.committer
        if name not in self._committers:
            try:
                self._committers[name] = create_committer(self.destination, self.config, name,
                                                          store=self.store)
            except OutcommitError as exc:
                raise BatchLogError(
                    f"job {record.job_id} of batch {record.batch_id} at {self.destination} was started "
                    f"by committer {name!r}, which cannot act here ({exc}): install or configure it "
                    "so that its state and uploads are rolled back (nothing was deleted)") from exc
        return self._committers[name]

    def _deletable(self, record: JobRecord) -> list[str]:
        """The files of ``record`` that a rollback may delete.

        A job record is only evidence, and a record can be stale or tampered with. So only
        files that the record's own job wrote — every data file's name carries its job id
        (``part-<task>-<seq>-<jobId>-a<attempt>``) — and that no committed batch names;
        never the batch log, never outside the destination.
        """
        if not record.files:
            return []
        committed = {f.path for e in self.log.entries() for f in e.files}
        marker = f"-{record.job_id}-a"
        doomed = []
        for file in record.files:
            path = self.log.file_path(file.path)  # refuses anything outside the destination
            relative = path[len(self.log.dest.rstrip("/")) + 1:]
            parts = relative.split("/")
            if parts[0] == LOG_DIR or relative in committed or marker not in parts[-1]:
                log.warning("not deleting %s for the rolled back job %s: %s", self.store.url(path),
                            record.job_id,
                            "the batch log" if parts[0] == LOG_DIR else
                            "a committed batch names it" if relative in committed else
                            "that job did not write it (its name lacks the job id)")
                continue
            doomed.append(path)
        return doomed

    @staticmethod
    def _abort(committer: Committer, job: JobContext) -> None:
        committer.abort_job(job)
        committer.cleanup_job(job)

    @staticmethod
    def _cleanup(committer: Committer, job: JobContext) -> None:  # the batch log says it committed
        committer.cleanup_committed_job(job)

    def _forget(self, job_id: str, decision: bool = True, also: Sequence[str] = ()) -> None:
        """Delete the job's record (and its decision, and ``also``: in the same request)."""
        try:
            self.log.forget_job(job_id, decision, also)
        except Exception:  # a leftover record is rolled back or cleaned at the next commit
            log.warning("could not delete the job record of %s", job_id, exc_info=True)

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
