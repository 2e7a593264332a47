"""Exactly-once micro-batches: each batch one job, committed once per batch id.

Engine-neutral: the Structured Streaming sink (``outcommit.spark.streaming``) drives it,
and so can any engine that replays a batch under the same id after a restart.

Identity. A batch's job id is derived from the query id, the batch id and the run
(``<queryId>-b<batchId>-r<run>``): every task of one run of a batch finds the same job
without asking the driver, and a replay of the batch after a restart is a different job
of the same batch, whose work areas never meet the dead run's.

Task side (:meth:`StreamingSink.begin_task`). A task first looks the batch up in the
log: a committed batch is a replay, and the task writes nothing. Otherwise it records
the job in ``_outcommit_log/_jobs/`` and sets the job up (idempotent: the first task of
the run does the work); then it writes and, where the committer allows, commits as any
task attempt (``outcommit.engine.tasks``). After writing it checks the log again (write,
then check): a straggler of a batch committed meanwhile throws its output away.

Driver side (:meth:`StreamingSink.commit_batch`), with the accepted attempts' results:

1. batch already in the log: a replay. Nothing new becomes visible; the replay's jobs
   are aborted (their uploads with them) and the log entry is returned.
2. every other job recorded for this batch or an earlier one (a run that died, a
   straggler) is rolled back: ``abort_job`` + ``cleanup_job``, and the files its commit
   had announced are deleted (only jobs the log does not name as committed, and of their
   files only those named with the job's id that no committed batch names, never the
   log's own files: a record is evidence, not an order);
3. the accepted attempts waiting for the driver are committed, the files about to be
   published are recorded with the job, the job is committed (``_SUCCESS`` off: the log
   entry is the batch's report), and the batch's entry is created exclusively: the
   commit point. The job's record goes last.

Interrupted commits are rolled back, never finished: before its entry exists a batch is
not committed, the source replays the same offsets under the same batch id after a
restart, and step 2 removes everything the dead commit had made visible. An entry is
written only after the job commit returned, so the log never names a missing file.
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
from .log import (
    DEFAULT_COMPACT_INTERVAL,
    LOG_DIR,
    BatchAlreadyCommitted,
    BatchEntry,
    BatchLog,
    BatchLogError,
    CommittedFile,
    JobRecord,
    entry_for,
)

log = logging.getLogger("outcommit.streaming")

SUCCESS_KEY = "outcommit.success.enabled"
JOB_ID_SOURCE = "streaming query, batch and run"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


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
        #: Called as ``on_step(step, batch_id)`` at "job-committed" (files visible, no log
        #: entry yet) and "logged" (entry written, job record not yet removed): tests stop
        #: a driver there.
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
        if existing is not None:
            self._check_query(existing, query_id)
            log.warning("batch %d is already committed to %s (job %s): the replay (jobs %s) is "
                        "discarded", batch_id, self.destination, existing.job_id, ", ".join(jobs) or "none")
            for job_id in jobs:
                if job_id != existing.job_id:
                    self._abort(self.job(job_id))
            rolled_back = self.roll_back_others(batch_id, keep=None)
            return BatchOutcome(existing, True, rolled_back)
        if len(jobs) > 1:
            raise CommitError(f"batch {batch_id}: tasks of several jobs ({', '.join(jobs)}) in one "
                              "micro-batch: one run of one query per destination")
        rolled_back = self.roll_back_others(batch_id, keep=jobs[0] if jobs else None)
        if not jobs:  # no task wrote (no partitions): the batch is committed all the same
            entry = entry_for(batch_id, query_id, None, self.committer.name, [])
            self.log.commit(entry)
            return BatchOutcome(entry, False, rolled_back)
        return BatchOutcome(self._commit_job(batch_id, query_id, jobs[0], results), False, rolled_back)

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
        # Before anything is published (v2 publishes at task commit, on the driver below):
        # what a rollback must delete if this commit dies.
        self.log.save_job_files(JobRecord(job_id, batch_id, query_id, run_id, committer.name,
                                          tuple(files)))
        messages = job_messages(committer, job, attempts)
        committer.add_metrics({"rows.written": sum(a.rows for a in attempts),
                               "files.written": len(files), "bytes.written": sum(a.bytes for a in attempts)})
        summary = committer.commit_job(job, messages)
        self.on_step("job-committed", batch_id)
        metrics = {k: v for k, v in summary.metrics.items() if isinstance(v, int)}
        metrics["tasks"] = len(attempts)
        metrics["task.retries"] = sum(1 for a in attempts if a.attempt > 0)
        metrics["commit.duration.ms"] = int((time.monotonic() - started) * 1000)
        entry = entry_for(batch_id, query_id, job_id, committer.name, files, metrics)
        try:
            self.log.commit(entry)  # the commit point
        except BatchAlreadyCommitted:
            # Another writer committed this batch id while we published: ours must go.
            self._roll_back(JobRecord(job_id, batch_id, query_id, run_id, committer.name, tuple(files)))
            raise
        self.on_step("logged", batch_id)
        self._forget(job_id)
        log.info("committed batch %d to %s: job %s, %d files, %d rows", batch_id, self.destination,
                 job_id, len(files), entry.rows)
        return entry

    def abort_batch(self, batch_id: int, results: Sequence[BatchTaskResult]) -> list[str]:
        """A batch failed: roll back every job of it the log does not name as committed."""
        committed = self.log.get(batch_id)
        for job_id in sorted({r.job_id for r in results if r.job_id is not None}):
            if committed is None or committed.job_id != job_id:
                self._abort(self.job(job_id))
        return self.roll_back_others(batch_id, keep=None, only_batch=True)

    # -- rolling back ------------------------------------------------------------------------------
    def roll_back_others(self, batch_id: int, keep: str | None, only_batch: bool = False) -> list[str]:
        """Roll back the recorded jobs of batches up to ``batch_id`` except ``keep``.

        A job that the log names as its batch's committed job is only cleaned up (its
        record was left by a commit that died after its commit point).
        """
        handled = []
        for record in self.log.jobs():
            if record.job_id == keep or record.batch_id > batch_id or \
                    (only_batch and record.batch_id != batch_id):
                continue
            committed = self.log.get(record.batch_id)
            if committed is not None and committed.job_id == record.job_id:
                self._cleanup(self.job(record.job_id))
                self._forget(record.job_id)
            else:
                self._roll_back(record)
            handled.append(record.job_id)
        return handled

    def _roll_back(self, record: JobRecord) -> None:
        log.warning("rolling back job %s of batch %d (run %s) at %s: it never reached the batch log",
                    record.job_id, record.batch_id, record.run_id, self.destination)
        self._abort(self.job(record.job_id))
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
        self._forget(record.job_id)

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

    def _abort(self, job: JobContext) -> None:
        self.committer.abort_job(job)
        self.committer.cleanup_job(job)

    def _cleanup(self, job: JobContext) -> None:  # the batch log says it committed
        self.committer.cleanup_committed_job(job)

    def _forget(self, job_id: str) -> None:
        try:
            self.log.forget_job(job_id)
        except Exception:  # a leftover record is rolled back or cleaned at the next commit
            log.warning("could not delete the job record of %s", job_id, exc_info=True)

    @staticmethod
    def _check_query(entry: BatchEntry, query_id: str) -> None:
        if entry.query_id and query_id and entry.query_id != query_id:
            raise BatchLogError(
                f"batch {entry.batch_id} of this destination was committed by query {entry.query_id}, "
                f"not by query {query_id}: one streaming query per destination (a new checkpoint "
                "location needs a new destination, as with Spark's file sink)")


__all__ = ["BatchIdentity", "BatchOutcome", "BatchTaskResult", "StreamingSink"]
