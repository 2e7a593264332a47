"""What the magic and staging committers share: pendingsets, job commit, abort, cleanup.

Layout of one job attempt (on the destination store for magic, on the shared store for
staging)::

    <root>/<jobAttempt>/_job.json                                  job attempt marker
    <root>/<jobAttempt>/_commit-started.json                       job commit has begun
    <root>/<jobAttempt>/pendingsets/<taskId>/<attemptId>.pendingset one per committed attempt
    <root>/<jobAttempt>/pendingsets/<taskId>/_claim.json           first attempt to commit
    <root>/<jobAttempt>/pendingsets/<taskId>/_allowed.json         the driver's permission

Which attempt of a task the job commits:

* with task commit messages, exactly the messages (Spark's commit coordinator decided);
* without, the attempt the driver recorded with ``allow_task_commit``; else the first
  attempt that committed (``_claim.json``, created exclusively, so a stale attempt that
  commits late cannot take it); an aborted attempt releases its claim, so the retry the
  driver allows after a failed task commit still commits (HADOOP-17258).

Pendingsets are published under the attempt's own name with an exclusive create, so no
attempt can overwrite another's, nor change its own after publishing.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from outcommit import capabilities as caps
from outcommit.capabilities import Capabilities
from outcommit.committer import Committer, relative_to
from outcommit.context import JobContext, TaskAttemptContext
from outcommit.errors import (
    CommitError,
    ConfigError,
    CorruptCommitDataError,
    CorruptFileError,
    DestinationExistsError,
    JobCommitError,
    TaskCommitError,
    UploadGoneError,
)
from outcommit.multipart import PendingUpload
from outcommit.store import Store
from outcommit.success import SuccessData

from .multipart import multipart_etag
from .pending import (
    PENDING_SUFFIX,
    PENDINGSET_SUFFIX,
    Expectations,
    PendingCommit,
    PendingSet,
    check_unique,
    digest,
    is_hidden_path,
    parse_pendingset,
    salvage_commits,
)
from .settings import INLINE_LIMIT

JOB_MARKER = "_job.json"
COMMIT_STARTED = "_commit-started.json"
PENDINGSETS = "pendingsets"
CLAIM = "_claim.json"
ALLOWED = "_allowed.json"

# Job directories of every committer here: a live one means another job is writing.
JOB_DIR_PREFIXES = ("__magic_job-", "__staging_job-")

T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True)
class Sweep:
    """What the pending-upload sweep did: aborted, and left to other live jobs."""

    aborted: int
    skipped: int
    owners: list[str]


def parallel(fn: Callable[[T], R], items: Sequence[T], threads: int) -> list[tuple[T, R | None,
                                                                                 BaseException | None]]:
    """Run ``fn`` over ``items`` on up to ``threads`` threads; every outcome, in order."""
    def one(item: T) -> tuple[T, R | None, BaseException | None]:
        try:
            return item, fn(item), None
        except Exception as exc:
            return item, None, exc

    if len(items) <= 1 or threads <= 1:
        return [one(i) for i in items]
    with ThreadPoolExecutor(max_workers=min(threads, len(items))) as pool:
        return list(pool.map(one, items))


class MultipartCommitter(Committer):
    """Base of the committers that complete S3 multipart uploads at job commit."""

    requires = (caps.MULTIPART_DELAYED_COMPLETION,)
    capabilities = Capabilities.of(
        caps.TASK_COMMIT_REPEATABLE,
        caps.JOB_COMMIT_REPEATABLE,
        caps.JOB_RECOVERABLE,
        caps.OUTPUT_INVISIBLE_UNTIL_JOB_COMMIT,
        # Pendingsets are per attempt; job commit completes exactly the messages' uploads.
        caps.TASK_COMMIT_ISOLATED,
    )
    #: First name component of the job directory (``__magic_job-``, ``__staging_job-``).
    job_dir_prefix: ClassVar[str] = ""

    def __init__(self, destination: str, store: Store, config: Any = None) -> None:
        super().__init__(destination, store, config)
        # 'a/../b' or 'a//b' names a different key on S3 than a reader expects, and no
        # containment check can hold against it: refused before anything is written.
        if any(part in ("", ".", "..") for part in self.dest.split("/")):
            raise ConfigError(f"destination {destination!r} has an empty, '.' or '..' path component")
        mp = store.multipart()
        if mp is None:
            raise CommitError(f"{self.name} needs multipart uploads; {store!r} has none")
        self.mp = mp
        self.abort_pending = self.config.get_bool("outcommit.s3.abort-pending-uploads", True)
        self.inline_limit = self.config.get_int(INLINE_LIMIT, 200, minimum=0)
        self.reserved = ("__magic", *JOB_DIR_PREFIXES, "_temporary")

    # -- where the job's state lives (overridden by staging's shared directory) -----------------
    @property
    def meta(self) -> Store:
        """The store holding pendingsets and markers."""
        return self.store

    def job_root(self, job_id: str) -> str:
        return self.store.join(self.dest, f"{self.job_dir_prefix}{job_id}")

    def job_attempt_dir(self, job: JobContext, attempt: int | None = None) -> str:
        return self.meta.join(self.job_root(job.job_id), str(job.attempt if attempt is None else attempt))

    def task_pendingsets_dir(self, task: TaskAttemptContext, attempt: int | None = None) -> str:
        return self.meta.join(self.job_attempt_dir(task.job, attempt), PENDINGSETS, task.task_id)

    def pendingset_path(self, task: TaskAttemptContext) -> str:
        return self.meta.join(self.task_pendingsets_dir(task), task.attempt_id + PENDINGSET_SUFFIX)

    def expectations(self, job: JobContext) -> Expectations:
        return Expectations(job_id=job.job_id, destination=self.dest, reserved=self.reserved)

    # -- job lifecycle -----------------------------------------------------------------------------
    def setup_job(self, job: JobContext) -> None:
        if self.conflict_scope() == "destination":
            self.check_destination_free()
        self.meta.save_json(self.meta.join(self.job_attempt_dir(job), JOB_MARKER),
                            {"jobId": job.job_id, "jobAttempt": job.attempt, "committer": self.name,
                             "destination": self.destination})
        self.logger(job).info("set up job attempt %d (%s)", job.attempt, self.job_attempt_dir(job))

    def require_job(self, job: JobContext, error: type[CommitError]) -> None:
        if not self.meta.exists(self.meta.join(self.job_attempt_dir(job), JOB_MARKER)):
            raise error(f"job {job.job_id} attempt {job.attempt} is not active at {self.destination}: "
                        "it was never set up, or it has already been committed or aborted")

    def _require_committable(self, job: JobContext) -> None:
        """Job commit may go on where an interrupted one ended the job for its writers."""
        started = self.meta.join(self.job_attempt_dir(job), COMMIT_STARTED)
        try:
            self.require_job(job, JobCommitError)
        except JobCommitError:
            if not self.meta.exists(started):
                raise

    def end_job(self, job: JobContext) -> None:
        """Delete the job's markers: from now on every writer's liveness check fails.

        A writer whose check still saw the marker had saved its pending data before this
        deletion; listings made after it find that data, so what reads it must come after.
        """
        for attempt in range(job.attempt + 1):
            self.meta.delete(self.meta.join(self.job_attempt_dir(job, attempt), JOB_MARKER))

    # -- task commit ---------------------------------------------------------------------------------
    def publish_task(self, task: TaskAttemptContext, pendingset: PendingSet) -> dict[str, Any]:
        """Publish the attempt's pendingset, claim the task, return the commit message.

        On any failure the attempt's uploads are aborted: nothing of it can be committed.
        """
        log = self.logger(task)
        path = self.pendingset_path(task)
        created: list[str] = []  # files this call created: removed again if it fails
        try:
            self.require_job(task.job, TaskCommitError)
            data = pendingset.to_bytes()
            try:
                self.meta.create_exclusive(path, data)
                created.append(path)
            except FileExistsError:
                # A retried task commit of this same attempt: fine if it says the same.
                existing = self.meta.load_json(path)
                commits = existing.get("commits") if isinstance(existing, dict) else None
                if not isinstance(commits, list) or \
                        [c.get("uploadId") if isinstance(c, dict) else None for c in commits] != \
                        [c.upload_id for c in pendingset.commits]:
                    raise TaskCommitError(f"{self.meta.url(path)} was already published with other "
                                          "uploads: this attempt's task commit cannot be repeated") \
                        from None
                data = self.meta.read_bytes(path)
            created += self._claim(task)
            # The job may have been committed or aborted while we uploaded: then nothing of
            # ours may stay pending (a late attempt must never leak).
            self.require_job(task.job, TaskCommitError)
        except BaseException:
            self.abort_commits(task.job, pendingset.commits)
            # A late attempt's files would recreate a finished job's directory: a stray
            # job directory turns the destination's pending-upload sweep off for good.
            for leftover in created:
                try:
                    self.meta.delete(leftover)
                except Exception:
                    log.warning("could not delete %s", self.meta.url(leftover), exc_info=True)
            raise
        message = pendingset.to_dict()
        message.update({"jobAttempt": task.job.attempt, "pendingset": self.meta.url(path),
                        "sha256": digest(data), "files": len(pendingset.commits),
                        "bytes": pendingset.length})
        if len(pendingset.commits) > self.inline_limit:
            # Big tasks: the message carries a digest-checked reference, not 1000s of entries.
            del message["commits"]
        log.info("committed task %s: %d files, %d bytes pending", task.attempt_id,
                 len(pendingset.commits), pendingset.length)
        return message

    def _claim(self, task: TaskAttemptContext) -> list[str]:
        """Claim the task for this attempt if no attempt has; returns the files created."""
        claim = self.meta.join(self.task_pendingsets_dir(task), CLAIM)
        body = json.dumps({"taskAttemptId": task.attempt_id, "time": time.time()}).encode()
        try:
            self.meta.create_exclusive(claim, body)
            return [claim]
        except FileExistsError:
            holder = self._read_attempt(claim)
            if holder != task.attempt_id:
                self.logger(task).warning(
                    "task %s was first committed by %s; %s is committed only if the driver allows "
                    "it or passes its message to commit_job", task.task_id, holder, task.attempt_id)
        return []

    def _read_attempt(self, path: str) -> str | None:
        try:
            value = self.meta.load_json(path).get("taskAttemptId")
        except (FileNotFoundError, CorruptFileError, AttributeError):
            return None
        return value if isinstance(value, str) else None

    def allow_task_commit(self, task: TaskAttemptContext) -> None:
        """The driver's record that ``task`` (this attempt) is the one allowed to commit.

        Job commit without messages then commits this attempt's pendingset and no other,
        also when an earlier attempt claimed the task and failed (HADOOP-17258).
        """
        self.meta.write_atomic(self.meta.join(self.task_pendingsets_dir(task), ALLOWED),
                               json.dumps({"taskAttemptId": task.attempt_id}).encode())

    def recover_task(self, task: TaskAttemptContext) -> bool:
        """Carry the task's committed pendingset of the previous job attempt into this one."""
        if task.job.attempt == 0:
            return False
        self.require_job(task.job, TaskCommitError)
        previous = task.job.attempt - 1
        chosen = self._choose_attempt(self.task_pendingsets_dir(task, previous))
        if chosen is None:
            return False
        data = self.meta.read_bytes(chosen)
        try:
            parsed = json.loads(data)
        except (ValueError, RecursionError) as exc:
            raise CorruptFileError(self.meta.url(chosen), None, f"not valid JSON: {exc}") from None
        pendingset = parse_pendingset(parsed, self.meta.url(chosen), self.expectations(task.job))
        target = self.meta.join(self.task_pendingsets_dir(task), posixpath_name(chosen))
        try:
            self.meta.create_exclusive(target, data)
        except FileExistsError:
            pass
        try:
            self.meta.create_exclusive(self.meta.join(self.task_pendingsets_dir(task), CLAIM),
                                       json.dumps({"taskAttemptId": pendingset.attempt_id}).encode())
        except FileExistsError:
            pass
        self.logger(task).info("recovered task %s (%d files) from job attempt %d", task.task_id,
                               len(pendingset.commits), previous)
        return True

    # -- job commit --------------------------------------------------------------------------------
    def commit_job(self, job: JobContext,
                   messages: Sequence[Mapping[str, Any]] | None = None) -> SuccessData:
        started = time.monotonic()
        log = self.logger(job)
        self._require_committable(job)
        commits: list[PendingCommit] = []
        try:
            pendingsets = (self._from_messages(job, messages) if messages is not None
                           else self._discover(job))
            commits = [c for p in pendingsets for c in p.commits]
            check_unique(commits, "pendingsets of the job")
            self.meta.save_json(self.meta.join(self.job_attempt_dir(job), COMMIT_STARTED),
                                {"jobId": job.job_id, "started": time.time()})
            removed = self.resolve_conflicts(job, commits)
            self.complete_all(job, commits)
            # The output is complete and visible: nothing below may fail the commit. The job
            # ends for its writers first, so that a straggler closing a file now either
            # aborts its own upload or has saved it where the listings below find it.
            self.end_job(job)
            metrics, diagnostics = self._after_completion(job)
            summary = self.write_success(
                job, [self.store.url(c.path) for c in commits],
                metrics={"tasks.committed": len(pendingsets),
                         "bytes.committed": sum(c.length for c in commits),
                         "conflict.deleted": removed, **metrics,
                         "commit.duration.ms": int((time.monotonic() - started) * 1000)},
                diagnostics=diagnostics)
        except CorruptFileError as exc:
            failed = self.failed_commit(job, exc, started, [self.store.url(c.path) for c in commits])
            raise CorruptCommitDataError(str(failed), failed.summary, exc) from exc
        except Exception as exc:
            raise self.failed_commit(job, exc, started, [self.store.url(c.path) for c in commits]) from exc
        # Every upload of this job is now complete or aborted (by the sweep or by _after_completion).
        self._teardown(job, delete_completed=False, sweep=False, own_aborts=False)
        log.info("committed job: %d files from %d tasks", len(commits), len(pendingsets))
        return summary

    def _after_completion(self, job: JobContext) -> tuple[dict[str, int], dict[str, str]]:
        """Sweep pending uploads under the destination, or report what stays pending.

        A failed sweep must not fail a job whose output is complete; a skipped or disabled
        one must not leave uploads pending silently (they cost storage until aborted).
        """
        log = self.logger(job)
        sweep = "disabled (outcommit.s3.abort-pending-uploads=false)"
        if self.abort_pending:
            try:
                result = self.abort_pending_under_destination(job)
                if not result.skipped:
                    return {"uploads.aborted.other": result.aborted}, {"uploads.sweep": "done"}
                sweep = (f"skipped {result.skipped} uploads that may belong to live jobs "
                         f"({', '.join(result.owners[:3])})")
            except Exception as exc:
                log.warning("aborting pending uploads under %s failed", self.destination, exc_info=True)
                sweep = f"failed: {type(exc).__name__}: {exc}"
        try:  # this job's own leftovers (uncommitted attempts), which no sweep covered
            self.abort_commits(job, self.known_commits(job))
        except Exception:
            log.warning("aborting the job's uncommitted uploads failed", exc_info=True)
        try:
            remaining = len([p for p in self.mp.list_pending(self.dest + "/") if _inside(p.path, self.dest)])
        except Exception:
            log.warning("could not list pending uploads under %s", self.destination, exc_info=True)
            remaining = -1
        if remaining:
            log.warning("%s uploads remain pending under %s (sweep %s): see 'outcommit uploads list "
                        "%s'", "some" if remaining < 0 else remaining, self.destination, sweep,
                        self.destination)
        return {"uploads.pending.remaining": remaining}, {"uploads.sweep": sweep}

    def _from_messages(self, job: JobContext, messages: Sequence[Mapping[str, Any]]) -> list[PendingSet]:
        expect = self.expectations(job)
        found: list[PendingSet] = []
        tasks: dict[str, str] = {}
        for index, message in enumerate(messages):
            where = f"task commit message #{index}"
            if not isinstance(message, Mapping):
                raise CorruptFileError(where, None, "is not a mapping")
            attempt_id = message.get("taskAttemptId")
            if not isinstance(attempt_id, str):
                raise CorruptFileError(where, "taskAttemptId", "is missing")
            if "commits" in message:
                pendingset = parse_pendingset(message, where, expect)
            else:
                pendingset = self._load_referenced(job, message, where)
            if pendingset.task_id in tasks:
                raise CorruptFileError(where, "taskId", f"task {pendingset.task_id} was given twice "
                                       f"({tasks[pendingset.task_id]} and {attempt_id})")
            tasks[pendingset.task_id] = attempt_id
            found.append(pendingset)
        return found

    def _load_referenced(self, job: JobContext, message: Mapping[str, Any], where: str) -> PendingSet:
        task_id, attempt_id = message.get("taskId"), message.get("taskAttemptId")
        if not isinstance(task_id, str) or "/" in task_id or not task_id.startswith("task_"):
            raise CorruptFileError(where, "taskId", f"invalid task id {task_id!r}")
        if not isinstance(attempt_id, str) or "/" in attempt_id or not attempt_id.startswith("attempt_"):
            raise CorruptFileError(where, "taskAttemptId", f"invalid attempt id {attempt_id!r}")
        # The path is ours, never the message's: a message cannot point outside the job.
        path = self.meta.join(self.job_attempt_dir(job), PENDINGSETS, task_id, attempt_id + PENDINGSET_SUFFIX)
        try:
            data = self.meta.read_bytes(path)
        except FileNotFoundError:
            raise CommitError(f"{where}: the pendingset {self.meta.url(path)} is missing") from None
        if digest(data) != message.get("sha256"):
            raise CorruptFileError(self.meta.url(path), "sha256",
                                   "does not match the task commit message (changed after task commit)")
        try:
            parsed = json.loads(data)
        except ValueError as exc:
            raise CorruptFileError(self.meta.url(path), None, f"not valid JSON: {exc}") from None
        return parse_pendingset(parsed, self.meta.url(path), self.expectations(job))

    def _choose_attempt(self, task_dir: str) -> str | None:
        """Path of the pendingset to commit for one task, or None when none may be."""
        entries = {e.name: e.path for e in self.meta.list_dir(task_dir) if not e.is_dir}
        published = {n[:-len(PENDINGSET_SUFFIX)]: p for n, p in entries.items()
                     if n.endswith(PENDINGSET_SUFFIX)}
        for marker in (ALLOWED, CLAIM):
            if marker in entries:
                attempt = self._read_attempt(entries[marker])
                if attempt is None:
                    raise CorruptFileError(self.meta.url(entries[marker]), "taskAttemptId", "is missing")
                return published.get(attempt)  # the chosen attempt may not have committed: None
        if len(published) > 1:
            raise CommitError(f"task directory {self.meta.url(task_dir)} holds pendingsets of "
                              f"{len(published)} attempts and no record of which one committed")
        return next(iter(published.values()), None)

    def _discover(self, job: JobContext) -> list[PendingSet]:
        root = self.meta.join(self.job_attempt_dir(job), PENDINGSETS)
        task_dirs = [e.path for e in self.meta.list_dir(root) if e.is_dir]
        expect = self.expectations(job)

        def load(task_dir: str) -> PendingSet | None:
            chosen = self._choose_attempt(task_dir)
            if chosen is None:
                return None
            return parse_pendingset(self.meta.load_json(chosen, max_bytes=64 << 20),
                                    self.meta.url(chosen), expect)

        found = []
        for _, result, error in parallel(load, task_dirs, self.threads):
            if error is not None:
                raise error
            if result is not None:
                found.append(result)
        return found

    def complete_all(self, job: JobContext, commits: Sequence[PendingCommit]) -> None:
        def complete(commit: PendingCommit) -> str:
            relative_to(commit.path, self.dest)  # containment, again, right before acting
            return self.mp.complete(commit.path, commit.upload_id, commit.etags)

        failures = [(c, e) for c, _, e in parallel(complete, list(commits), self.threads) if e is not None]
        if failures:
            commit, error = failures[0]
            raise CommitError(f"{len(failures)} of {len(commits)} uploads could not be completed, e.g. "
                              f"{self.store.url(commit.path)}: {error}. Job commit can be retried; "
                              "abort_job removes what was completed") from error

    # -- conflict modes --------------------------------------------------------------------------------
    def conflict_scope(self) -> str:
        """'destination' (whole directory) or 'partitions' (only those written)."""
        return "destination"

    def resolve_conflicts(self, job: JobContext, commits: Sequence[PendingCommit]) -> int:
        """Apply the conflict mode before anything is completed; returns objects deleted."""
        if self.conflict_mode == "append":
            return 0
        ours = {c.path for c in commits}
        if self.conflict_scope() == "destination":
            roots = [""]
            candidates = self.store.list_files(self.dest)
        else:
            roots = sorted({relative_to(c.path, self.dest).rpartition("/")[0] for c in commits})
            candidates = []
            for root in roots:
                if root:
                    candidates += self.store.list_files(self.store.join(self.dest, root))
                else:  # partition '' is the files at the top level, not the whole table
                    candidates += [i for i in self.store.list_dir(self.dest) if not i.is_dir]
        existing = [i.path for i in candidates
                    # ours: completed by an earlier try of this very commit
                    if i.path not in ours and not is_hidden_path(relative_to(i.path, self.dest))]
        if not existing:
            return 0
        if self.conflict_mode == "fail":
            where = "partitions " + ", ".join(r or "(top level)" for r in roots) \
                if self.conflict_scope() != "destination" else "the destination"
            raise DestinationExistsError(
                f"{where} of {self.destination} already hold data ({self.store.url(existing[0])}, ...) "
                "and the conflict mode is 'fail': use 'append' or 'replace', or another destination")
        self._check_completable(commits)
        self.store.delete_files(existing)
        self.logger(job).info("replace: deleted %d existing files", len(existing))
        return len(existing)

    def _check_completable(self, commits: Sequence[PendingCommit]) -> None:
        """Before 'replace' deletes old data: every upload is still pending (or already ours).

        An upload aborted meanwhile (another job's sweep, a lifecycle rule, a stray abort)
        would otherwise be found only at completion, after the old data is gone. One
        listing per 1000 pending uploads, not a request per file.
        """
        pending = {(p.path, p.upload_id) for p in self.mp.list_pending(self.dest + "/")}
        for commit in commits:
            if (commit.path, commit.upload_id) in pending:
                continue
            current = self.store.info(commit.path)  # completed by an earlier try of this commit?
            expected = multipart_etag(commit.etags)
            if current is None or expected is None or current.etag != expected:
                raise UploadGoneError(
                    f"upload {commit.upload_id} to {self.store.url(commit.path)} is no longer pending "
                    "(aborted by a sweep, a lifecycle rule or 'outcommit uploads abort'): nothing was "
                    "deleted for conflict mode 'replace'; rerun the job")

    # -- abort and cleanup --------------------------------------------------------------------------------
    def abort_commits(self, job: JobContext | TaskAttemptContext, commits: Iterable[PendingCommit],
                      delete_completed: bool = False) -> int:
        """Abort uploads (contained ones only); optionally delete what this job completed."""
        items = [c for c in commits if _inside(c.path, self.dest)]

        def abort(commit: PendingCommit) -> bool:
            if self.mp.abort(commit.path, commit.upload_id):
                return True
            if delete_completed:
                current = self.store.info(commit.path)
                expected = multipart_etag(commit.etags) if commit.etags else None
                # Only an object carrying exactly these parts' etag is this job's output.
                if current is not None and expected is not None and current.etag == expected:
                    self.store.delete(commit.path)
            return False

        outcomes = parallel(abort, items, self.threads)
        for commit, _, error in outcomes:
            if error is not None:
                self.logger(job).warning("could not abort upload %s to %s: %s", commit.upload_id,
                                         self.store.url(commit.path), error)
        return sum(1 for _, ok, _ in outcomes if ok)

    def abort_pending_under_destination(self, job: JobContext) -> Sweep:
        """Abort the pending uploads under the destination *directory* that no other job owns.

        Never an adjacent prefix (``dataset1/`` is not ``dataset10/``). An upload belongs to
        another live job when a directory on its path, from the bucket down to its parent,
        holds that job's directory: a job writing to the bucket root or to a parent of this
        destination, one writing to a sub-directory of it, or one writing here at the same
        time. Those are skipped and reported (a crashed job's directory keeps protecting its
        uploads until that job is aborted: see docs/s3.md).
        """
        pending = [p for p in self.mp.list_pending(self.dest + "/") if _inside(p.path, self.dest)]
        busy = self._directories_with_other_jobs(job, pending)
        owned = [p for p in pending if any(d in busy for d in _ancestors(p.path))]
        others = sorted({name for d in busy for name in busy[d]})
        if owned:
            self.logger(job).warning("not aborting %d pending uploads under %s: they may belong to "
                                     "the live jobs %s", len(owned), self.destination,
                                     ", ".join(others[:3]))
        pending = [p for p in pending if p not in owned]
        outcomes = parallel(lambda p: self.mp.abort(p.path, p.upload_id), pending, self.threads)
        count = sum(1 for _, ok, _ in outcomes if ok)
        for upload, _, error in outcomes:
            if error is not None:
                self.logger(job).warning("could not abort upload %s to %s: %s", upload.upload_id,
                                         self.store.url(upload.path), error)
        if count:
            self.logger(job).info("aborted %d other pending uploads under %s", count, self.destination)
        return Sweep(aborted=count, skipped=len(owned), owners=others)

    def _directories_with_other_jobs(self, job: JobContext,
                                     uploads: Sequence[PendingUpload]) -> dict[str, list[str]]:
        """Directories on the uploads' paths that hold another job's directory, with its names.

        One listing per distinct directory (the bucket and the destination's ancestors are
        shared by every upload): a job's directory is always a child of its destination.
        """
        own = self.store.join(self.dest, f"{self.job_dir_prefix}{job.job_id}")
        directories = sorted({d for u in uploads for d in _ancestors(u.path)})

        def others(directory: str) -> list[str]:
            return [c.name for c in self.store.list_dir(directory)
                    if c.is_dir and c.name.startswith(JOB_DIR_PREFIXES) and c.path != own]

        found: dict[str, list[str]] = {}
        for directory, names, error in parallel(others, directories, self.threads):
            if error is not None:
                raise error  # unknown: abort nothing rather than another job's upload
            if names:
                found[directory] = names
        return found

    def known_commits(self, job: JobContext) -> list[PendingCommit]:
        """Every upload of the job that a file identifies, corrupt files included (best effort)."""
        expect = self.expectations(job)
        found: list[PendingCommit] = []
        for info in self.meta.list_files(self.job_root(job.job_id)):
            if not info.path.endswith((PENDINGSET_SUFFIX, PENDING_SUFFIX)):
                continue
            try:
                found.extend(abortable_commits(self.meta, info.path, expect))
            except OSError:
                continue
        return found

    def abort_job(self, job: JobContext) -> None:
        self._teardown(job, delete_completed=True)

    def cleanup_job(self, job: JobContext) -> None:
        self._teardown(job, delete_completed=False)

    def _teardown(self, job: JobContext, delete_completed: bool, sweep: bool = True,
                  own_aborts: bool = True) -> None:
        log = self.logger(job)
        # End the job before anything else: a straggling writer whose liveness check comes
        # after this sees the job gone and aborts its own upload; one whose check came
        # before had already saved its .pending, which the listing below finds.
        try:
            self.end_job(job)
        except Exception:
            log.warning("deleting the job markers failed", exc_info=True)
        if own_aborts:
            try:
                started = delete_completed and any(
                    self.meta.exists(self.meta.join(self.job_attempt_dir(job, a), COMMIT_STARTED))
                    for a in range(job.attempt + 1))
                self.abort_commits(job, self.known_commits(job), delete_completed=started)
            except Exception:  # abort and cleanup never raise: they run on failure paths
                log.warning("aborting the job's own uploads failed", exc_info=True)
        if sweep and self.abort_pending:
            try:
                self.abort_pending_under_destination(job)
            except Exception:
                log.warning("aborting pending uploads under %s failed", self.destination, exc_info=True)
        try:
            self.meta.delete(self.job_root(job.job_id), recursive=True)
        except Exception:
            log.warning("deleting the job directory failed", exc_info=True)
        try:  # local staging data goes even when the store is unreachable
            self.cleanup_local(job)
        except Exception:
            log.warning("deleting the job's local directory failed", exc_info=True)

    def cleanup_local(self, job: JobContext) -> None:
        """Remove local state of the job (staging directories)."""

    def abort_published(self, task: TaskAttemptContext) -> None:
        """Abort the uploads of this attempt's published pendingset and release its claim."""
        path = self.pendingset_path(task)
        try:
            commits = abortable_commits(self.meta, path, self.expectations(task.job))
        except FileNotFoundError:
            return
        self.abort_commits(task, commits)
        claim = self.meta.join(self.task_pendingsets_dir(task), CLAIM)
        if self._read_attempt(claim) == task.attempt_id:
            self.meta.delete(claim)
        self.meta.delete(path)


def abortable_commits(store: Store, path: str, expect: Expectations) -> list[PendingCommit]:
    """The contained uploads a pending file identifies, however corrupt it is (for aborts)."""
    raw = store.read_bytes(path)
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):  # not JSON: scan the text for entries
        return salvage_commits(None, expect, raw)
    return salvage_commits(data, expect)


def _ancestors(path: str) -> list[str]:
    """Every directory above a store path, from the bucket down: ``b/x/y/f`` -> b, b/x, b/x/y."""
    parts = path.split("/")[:-1]
    return ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]


def _inside(path: str, root: str) -> bool:
    try:
        relative_to(path, root)
    except Exception:
        return False
    return True


def posixpath_name(path: str) -> str:
    return path.rstrip("/").rpartition("/")[2]
