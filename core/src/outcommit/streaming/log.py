"""The batch log: which micro-batches are committed to a destination, and their files.

Spark's file sink keeps ``_spark_metadata/<batchId>`` (``ManifestFileCommitProtocol``);
this is its analogue, in the destination, as JSON::

    <dest>/_outcommit_log/0.json          one entry per committed batch (its files, rows)
    <dest>/_outcommit_log/1.json
    <dest>/_outcommit_log/9.compact.json  every 10th batch: all batches 0..9 in one file
    <dest>/_outcommit_log/_jobs/<jobId>.json   jobs started and not yet finished

An entry is created exclusively (create-if-absent) after the batch's job commit made its
files visible: a batch is committed exactly when its entry exists, and an entry never
names a file that is not there. A refused create is not proof that someone else committed
the batch (a client retrying a create whose response was lost is refused its own entry):
the entry is read, and only another job's entry means "already committed".

A compaction batch writes ``<n>.compact.json`` instead of ``<n>.json``; it holds every
batch up to ``n``, so readers read the newest compaction and the entries after it.
Entries older than the previous compaction are deleted after a new one is written (a
reader that listed before has one interval to finish).

``_jobs/`` records each job a query started for a batch (written by the first of its
tasks) and, once the driver knows them, the files its job commit is about to publish:
the evidence a restarted query uses to roll back a batch whose commit was interrupted.

``_jobs/<jobId>.decision`` says whether that job commits or is rolled back, created
exclusively by whoever decides first: the job's own driver ("commit", once its job
commit returned and before it creates the entry) or a rollback ("abort", before it
deletes anything). Exactly one wins, so a rollback never deletes files whose job could
still create its entry (a driver that lost its lease and keeps running), and a driver
whose job was rolled back never logs it. A decision goes with its job's record once the
batch has an entry; an "abort" stays until then (it fences the job's driver).

``_query.json`` names the query the log belongs to (created exclusively by the first
task of its first batch): one streaming query per destination.
"""

from __future__ import annotations

import json
import logging
import posixpath
import re
import time
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import CommitError, CorruptFileError
from ..paths import relative_to
from ..store import Store
from .records import COMPACT_FORMAT, QUERY_FORMAT, BatchEntry, Decision, JobRecord

log = logging.getLogger("outcommit.streaming")

LOG_DIR = "_outcommit_log"
JOBS_DIR = "_jobs"
QUERY_FILE = "_query.json"
DECISION_SUFFIX = ".decision"
#: As Spark's ``spark.sql.streaming.fileSink.log.compactInterval``.
DEFAULT_COMPACT_INTERVAL = 10
_ENTRY = re.compile(r"^(\d{1,19})(\.compact)?\.json$")
_READ_ATTEMPTS = 3


class BatchLogError(CommitError):
    """The batch log cannot be used as it is (another query's log, a corrupt entry...)."""


class BatchAlreadyCommitted(BatchLogError, FileExistsError):
    """An entry for this batch exists already: someone else committed it."""


class BatchLog:
    """The batch log of one destination (a store path)."""

    def __init__(self, store: Store, dest: str, compact_interval: int = DEFAULT_COMPACT_INTERVAL) -> None:
        if compact_interval < 1:
            raise ValueError(f"compact interval must be >= 1, got {compact_interval}")
        self.store = store
        self.dest = dest
        self.dir = store.join(dest, LOG_DIR)
        self.jobs_dir = store.join(self.dir, JOBS_DIR)
        self.compact_interval = compact_interval

    # -- names ------------------------------------------------------------------------------
    def entry_path(self, batch_id: int) -> str:
        return self.store.join(self.dir, f"{batch_id}.json")

    def compact_path(self, batch_id: int) -> str:
        return self.store.join(self.dir, f"{batch_id}.compact.json")

    def is_compaction_batch(self, batch_id: int) -> bool:
        """As Spark's file sink: batches 9, 19, 29, ... with an interval of 10."""
        return (batch_id + 1) % self.compact_interval == 0

    def listing(self) -> tuple[dict[int, str], dict[int, str]]:
        """(batch id -> entry path, batch id -> compaction path) as the store lists them now."""
        deltas: dict[int, str] = {}
        compacts: dict[int, str] = {}
        for info in self.store.list_dir(self.dir):
            match = _ENTRY.match(info.name)
            if match and not info.is_dir:
                (compacts if match.group(2) else deltas)[int(match.group(1))] = info.path
        return deltas, compacts

    # -- reading ------------------------------------------------------------------------------
    def _load(self, path: str) -> Any:
        return self.store.load_json(path)

    def _load_compact(self, path: str) -> list[BatchEntry]:
        data = self._load(path)
        where = self.store.url(path)
        if not isinstance(data, Mapping) or data.get("format") != COMPACT_FORMAT or \
                not isinstance(data.get("batches"), list):
            raise CorruptFileError(where, "format", f"not a compacted batch log ({COMPACT_FORMAT})")
        return [BatchEntry.from_dict(b, where) for b in data["batches"]]

    def get(self, batch_id: int) -> BatchEntry | None:
        """The entry of ``batch_id`` if that batch is committed, else None."""
        for _ in range(_READ_ATTEMPTS):
            try:
                return BatchEntry.from_dict(self._load(self.entry_path(batch_id)),
                                            self.store.url(self.entry_path(batch_id)))
            except FileNotFoundError:
                pass
            _, compacts = self.listing()
            covering = sorted(n for n in compacts if n >= batch_id)
            if not covering:
                return None
            try:
                found = [e for e in self._load_compact(compacts[covering[0]]) if e.batch_id == batch_id]
            except FileNotFoundError:
                continue  # compacted away meanwhile: list again
            return found[0] if found else None
        raise BatchLogError(f"the batch log {self.store.url(self.dir)} kept changing while batch "
                            f"{batch_id} was looked up")

    def entries(self) -> list[BatchEntry]:
        """Every committed batch, in batch order: the newest compaction and the entries after it."""
        for _ in range(_READ_ATTEMPTS):
            deltas, compacts = self.listing()
            try:
                found: dict[int, BatchEntry] = {}
                base = max(compacts) if compacts else -1
                if compacts:
                    found.update((e.batch_id, e) for e in self._load_compact(compacts[base]))
                for batch_id in sorted(n for n in deltas if n > base):
                    path = deltas[batch_id]
                    found[batch_id] = BatchEntry.from_dict(self._load(path), self.store.url(path))
                return [found[n] for n in sorted(found)]
            except FileNotFoundError:
                continue  # a compaction removed what we listed: list again
        raise BatchLogError(f"the batch log {self.store.url(self.dir)} kept changing while it was read")

    def latest(self) -> int | None:
        """The highest committed batch id, or None."""
        deltas, compacts = self.listing()
        ids = [*deltas, *compacts]
        return max(ids) if ids else None

    # -- writing -------------------------------------------------------------------------------
    def _create(self, path: str, data: Any) -> None:
        """Create ``path`` only if absent: FileExistsError otherwise."""
        payload = json.dumps(data, indent=1).encode("utf-8")
        exclusive = self.store.exclusive_create()
        if exclusive is not None:
            exclusive.create_exclusive(path, payload)
            return
        # Stores that do not declare create-if-absent (e.g. a GCS server configured with
        # outcommit.gcs.preconditions=false, which ignores ifGenerationMatch): checked, then
        # written. Two queries committing one batch id at once could both pass; one query
        # per destination.
        if self.store.exists(path):
            raise FileExistsError(path)
        self.store.write_atomic(path, payload)

    def commit(self, entry: BatchEntry) -> str:
        """Record ``entry`` as committed; at a compaction batch, with every earlier batch.

        Raises :class:`BatchAlreadyCommitted` when the batch has an entry already.
        """
        batch_id = entry.batch_id
        if self.is_compaction_batch(batch_id):
            earlier = [e for e in self.entries() if e.batch_id < batch_id]
            path = self.compact_path(batch_id)
            data: Any = {"format": COMPACT_FORMAT, "throughBatch": batch_id,
                         "batches": [e.to_dict() for e in [*earlier, entry]]}
        else:
            path, data = self.entry_path(batch_id), entry.to_dict()
        existing = self.get(batch_id)
        if existing is not None:
            if self._is_ours(existing, entry, self.store.url(path)):
                return path
            raise BatchAlreadyCommitted(
                f"batch {batch_id} is already committed to {self.store.url(self.dest)} "
                f"(job {existing.job_id})")
        try:
            self._create(path, data)
        except FileExistsError:
            # Not necessarily someone else's: a client that retries (botocore, gcsfs, the
            # Azure SDK) after losing the response to a create that succeeded gets 412/409
            # for its own entry. Only the entry itself tells; if it cannot be read, fail
            # without touching anything (the caller rolls back only on BatchAlreadyCommitted).
            found = self._read_created(path, batch_id)
            if not self._is_ours(found, entry, self.store.url(path)):
                raise BatchAlreadyCommitted(
                    f"batch {batch_id} was committed to {self.store.url(self.dest)} by someone "
                    f"else (job {found.job_id})") from None
            log.info("batch %d: the log entry %s exists and is this commit's (a retried create "
                     "whose first response was lost)", batch_id, self.store.url(path))
        if path == self.compact_path(batch_id):
            self.delete_compacted(batch_id)
        return path

    def _read_created(self, path: str, batch_id: int) -> BatchEntry:
        """The entry of ``batch_id`` that ``path`` (an entry or a compaction) holds now."""
        where = self.store.url(path)
        try:
            if path == self.compact_path(batch_id):
                found = [e for e in self._load_compact(path) if e.batch_id == batch_id]
                if len(found) != 1:
                    raise CorruptFileError(where, "batches", f"does not hold batch {batch_id} once")
                return found[0]
            entry = BatchEntry.from_dict(self._load(path), where)
        except FileNotFoundError:
            raise BatchLogError(f"{where} was reported to exist and then could not be read: "
                                f"batch {batch_id}'s commit state is unknown; nothing was "
                                "deleted") from None
        if entry.batch_id != batch_id:
            raise CorruptFileError(where, "batchId", f"{entry.batch_id}, expected {batch_id}")
        return entry

    @staticmethod
    def _is_ours(found: BatchEntry, entry: BatchEntry, where: str) -> bool:
        """Is ``found`` (the batch's entry in the log) the one ``entry`` would have written?"""
        if found.job_id != entry.job_id or found.query_id != entry.query_id:
            return False
        if {f.path for f in found.files} != {f.path for f in entry.files}:
            # Same job, other files: not something this sink writes. Refuse to guess.
            raise CorruptFileError(where, "files", f"job {entry.job_id}'s entry names other files "
                                   "than its commit published")
        return True

    def delete_compacted(self, batch_id: int) -> int:
        """After compaction ``batch_id``: delete what the previous compaction already covers."""
        deltas, compacts = self.listing()
        previous = [n for n in compacts if n < batch_id]
        if not previous:
            return 0
        keep_from = max(previous)
        doomed = [p for n, p in deltas.items() if n <= keep_from] + \
                 [p for n, p in compacts.items() if n < keep_from]
        # At once (S3: one request), not one round trip each in the batch's commit.
        try:
            self.store.delete_files(doomed)
        except Exception:  # a leftover entry is harmless: compactions cover it, the next one retries it
            log.warning("could not delete every compacted log entry under %s (%d)", self.store.url(self.dir),
                        len(doomed), exc_info=True)
        return len(doomed)

    # -- jobs started ------------------------------------------------------------------------------
    def job_path(self, job_id: str) -> str:
        return self.store.join(self.jobs_dir, f"{job_id}.json")

    def register_job(self, record: JobRecord) -> bool:
        """Record that ``record``'s job started (first task wins). False if it was known."""
        try:
            self._create(self.job_path(record.job_id), record.to_dict())
        except FileExistsError:
            return False
        return True

    def save_job_files(self, record: JobRecord) -> None:
        """Record the files the job's commit is about to publish (before it publishes any)."""
        self.store.save_json(self.job_path(record.job_id), record.to_dict())

    def jobs(self) -> list[JobRecord]:
        return self.job_states()[0]

    def job_states(self) -> tuple[list[JobRecord], list[str]]:
        """The job records, in batch order, and the ids of jobs that have a decision and no
        record (settled: their decisions wait for their batch's entry): one listing."""
        records, decided = [], set()
        for info in self.store.list_dir(self.jobs_dir):
            if not info.is_dir and info.name.endswith(DECISION_SUFFIX):
                decided.add(info.name[:-len(DECISION_SUFFIX)])
            if info.is_dir or not info.name.endswith(".json"):
                continue
            where = self.store.url(info.path)
            try:
                record = JobRecord.from_dict(self._load(info.path), where)
            except FileNotFoundError:
                continue  # finished meanwhile
            if info.name != f"{record.job_id}.json":
                # Its record is what a rollback forgets: it must be this file.
                raise CorruptFileError(where, "jobId", f"{record.job_id!r} is not the record's name")
            records.append(record)
        orphans = decided - {r.job_id for r in records}
        return sorted(records, key=lambda r: (r.batch_id, r.job_id)), sorted(orphans)

    def forget_job(self, job_id: str, decision: bool = True, also: Sequence[str] = ()) -> None:
        """Delete the job's record, its decision (``decision``) and ``also``, in one request
        where the store batches deletes. Keep an "abort" decision while the job's batch has
        no entry: it fences the job's driver, which may still be running."""
        paths = [self.job_path(job_id), *([self.decision_path(job_id)] if decision else []), *also]
        if len(paths) == 1:
            self.store.delete(paths[0])
        else:
            self.store.delete_files(paths)

    # -- decisions ---------------------------------------------------------------------------------
    def decision_path(self, job_id: str) -> str:
        return self.store.join(self.jobs_dir, f"{job_id}{DECISION_SUFFIX}")

    def decide(self, job_id: str, batch_id: int, outcome: str, by: str) -> Decision:
        """Decide ``outcome`` for the job unless someone decided first: the decision that stands.

        Created exclusively: exactly one of the job's driver ("commit") and a rollback
        ("abort") wins. A refused create is read, not trusted: a client retrying a create
        whose response was lost is refused its own decision, and finds it.
        """
        path = self.decision_path(job_id)
        mine = Decision(job_id, batch_id, outcome, by, time.time())
        for _ in range(_READ_ATTEMPTS):
            try:
                self._create(path, mine.to_dict())
                return mine
            except FileExistsError:
                pass
            try:
                found = Decision.from_dict(self._load(path), self.store.url(path))
            except FileNotFoundError:
                continue  # deleted meanwhile (its batch got an entry): decide again
            if found.job_id != job_id:
                raise CorruptFileError(self.store.url(path), "jobId",
                                       f"{found.job_id!r}, expected {job_id!r}")
            return found
        raise BatchLogError(f"the decision {self.store.url(path)} kept appearing and disappearing: "
                            f"job {job_id}'s commit state is unknown; nothing was deleted")

    def decision(self, job_id: str) -> Decision | None:
        path = self.decision_path(job_id)
        try:
            return Decision.from_dict(self._load(path), self.store.url(path))
        except FileNotFoundError:
            return None

    # -- the query the log belongs to ---------------------------------------------------------------
    def owner(self) -> str | None:
        """The query this log belongs to, None before its first task claimed it."""
        path = self.store.join(self.dir, QUERY_FILE)
        try:
            data = self._load(path)
        except FileNotFoundError:
            return None
        query = data.get("queryId") if isinstance(data, Mapping) else None
        if not isinstance(data, Mapping) or data.get("format") != QUERY_FORMAT or \
                not isinstance(query, str) or not query:
            raise CorruptFileError(self.store.url(path), "queryId", f"not a query's claim ({QUERY_FORMAT})")
        return query

    def claim(self, query_id: str) -> None:
        """Refuse unless the log belongs to ``query_id``; claim it for ``query_id`` if nobody has.

        One read once claimed (the claim never changes). A log written before claims were
        recorded belongs to the query of its newest entry.
        """
        found = self.owner()
        if found is None:
            newest = self.latest()
            entry = self.get(newest) if newest is not None else None
            claimant = entry.query_id if entry is not None and entry.query_id else query_id
            try:
                self._create(self.store.join(self.dir, QUERY_FILE),
                             {"format": QUERY_FORMAT, "queryId": claimant, "claimedAt": time.time()})
            except FileExistsError:
                pass  # another task (or query) claimed it first: read who
            found = self.owner()
        if found != query_id:
            raise BatchLogError(
                f"the batch log of {self.store.url(self.dest)} belongs to query {found}, not to query "
                f"{query_id}: one streaming query per destination (write this query to its own "
                "destination; a new checkpoint location needs a new destination, as with Spark's "
                "file sink)")

    # -- paths ------------------------------------------------------------------------------------------
    def file_path(self, relative: str) -> str:
        """The store path of a logged file, refusing anything outside the destination."""
        full = posixpath.normpath(self.store.join(self.dest, relative))
        relative_to(full, self.dest)
        return full
