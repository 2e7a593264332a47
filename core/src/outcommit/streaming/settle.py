"""Settling the jobs a streaming destination's log records: roll each back, or see it logged.

A restarted run (or a second live one, or Spark's abort of a batch) meets the jobs other
runs of the query recorded in ``_outcommit_log/_jobs/``. Each is settled: a job the log
names is only cleaned up; any other is rolled back through the committer that made it
— but only once it can no longer create its batch's entry (another job's entry is there,
or this rollback's "abort" decision stands); a job whose driver decided "commit" first
is logged instead (all its files are visible and its record names them).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..committer import Committer
from ..context import JobContext
from ..errors import CorruptFileError, OutcommitError
from ..factory import create_committer
from .log import LOG_DIR, BatchAlreadyCommitted, BatchLog, BatchLogError
from .records import ABORT, COMMIT, BatchEntry, JobRecord, entry_for

log = logging.getLogger("outcommit.streaming")


class Settler:
    """Settles recorded jobs of one destination for one sink (its committer, its config)."""

    def __init__(self, batch_log: BatchLog, committer: Committer, config: Mapping[str, Any],
                 destination: str, job: Callable[[str], JobContext],
                 logged: Callable[[BatchEntry], None] = lambda _entry: None) -> None:
        self.log = batch_log
        #: Called with every entry a rollback creates (Spark's log follows the batch log).
        self.logged = logged
        self.store = batch_log.store
        self.committer = committer
        self.config = config
        self.destination = destination
        self.job = job
        #: The committers, by name, that made the jobs a rollback meets (a restart may change it).
        self.committers: dict[str, Committer] = {}
        #: The "abort" decisions won here and kept until their batch is logged: job -> batch.
        self.fences: dict[str, int] = {}

    def settle_all(self, records: Sequence[JobRecord], orphans: Sequence[str], batch_id: int,
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
            settled = self.settle(record, by)
            if settled is not None and settled.batch_id == batch_id:
                entry = settled
            handled.append(record.job_id)
        self.collect_decisions(orphans, batch_id)
        return handled, entry

    def settle(self, record: JobRecord, by: str) -> BatchEntry | None:
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
                entry = self.finish(record)
            else:
                # Fenced. Its driver deletes its decision only after its entry exists: look again.
                entry = self.log.get(record.batch_id)
                if entry is None:
                    self.roll_back(record, keep_decision=True)
                    self.fences[record.job_id] = record.batch_id
                    return None
        if entry.job_id != record.job_id:
            self.roll_back(record)  # another job's entry stands: this one can never win
            return None
        self.cleanup(self.committer_for(record), self.job(record.job_id))
        self.forget(record.job_id)
        return entry

    def finish(self, record: JobRecord) -> BatchEntry:
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
        self.logged(entry)
        return entry

    def roll_back(self, record: JobRecord, keep_decision: bool = False) -> None:
        """Abort the job through the committer that made it, delete the files it published."""
        log.warning("rolling back job %s of batch %d (run %s) at %s: it never reached the batch log",
                    record.job_id, record.batch_id, record.run_id, self.destination)
        self.abort(self.committer_for(record), self.job(record.job_id))
        doomed = self.deletable(record)
        if doomed:
            # In batches where the store has them, else the committer's threads at once: a
            # rolled back batch of 1,000 files was 1,000 deletes one after another.
            try:
                self.store.delete_files(doomed, threads=self.committer.threads)
            except Exception:
                log.warning("could not delete the %d files of the rolled back job %s under %s",
                            len(doomed), record.job_id, self.destination, exc_info=True)
                raise
        self.forget(record.job_id, decision=not keep_decision)

    def lifted_fences(self, batch_id: int) -> list[str]:
        """The decisions of the jobs this sink fenced off from ``batch_id``, which is logged
        now: no driver of theirs can create its entry any more."""
        lifted = [job_id for job_id, batch in self.fences.items() if batch == batch_id]
        for job_id in lifted:
            del self.fences[job_id]
        return [self.log.decision_path(job_id) for job_id in lifted]

    def delete_decisions(self, paths: Sequence[str]) -> None:
        if not paths:
            return
        try:
            self.store.delete_files(list(paths))
        except Exception:  # a leftover decision is collected by a later commit
            log.warning("could not delete %d settled decisions at %s", len(paths), self.destination,
                        exc_info=True)

    def collect_decisions(self, orphans: Sequence[str], batch_id: int) -> None:
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
                self.fences[job_id] = batch_id
        self.delete_decisions(doomed)

    def committer_for(self, record: JobRecord) -> Committer:
        """The committer that made ``record``'s job (a restart may have changed the query's):
        aborting a magic job through the directory committer left its state and uploads."""
        name = record.committer or self.committer.name
        if name == self.committer.name:
            return self.committer
        if name not in self.committers:
            try:
                self.committers[name] = create_committer(self.destination, self.config, name,
                                                          store=self.store)
            except OutcommitError as exc:
                raise BatchLogError(
                    f"job {record.job_id} of batch {record.batch_id} at {self.destination} was started "
                    f"by committer {name!r}, which cannot act here ({exc}): install or configure it "
                    "so that its state and uploads are rolled back (nothing was deleted)") from exc
        return self.committers[name]

    def deletable(self, record: JobRecord) -> list[str]:
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
    def abort(committer: Committer, job: JobContext) -> None:
        committer.abort_job(job)
        committer.cleanup_job(job)

    @staticmethod
    def cleanup(committer: Committer, job: JobContext) -> None:  # the batch log says it committed
        committer.recovery.state.cleanup_committed_job(job)

    def forget(self, job_id: str, decision: bool = True, also: Sequence[str] = ()) -> None:
        """Delete the job's record (and its decision, and ``also``: in the same request)."""
        try:
            self.log.forget_job(job_id, decision, also)
        except Exception:  # a leftover record is rolled back or cleaned at the next commit
            log.warning("could not delete the job record of %s", job_id, exc_info=True)


__all__ = ["Settler"]
