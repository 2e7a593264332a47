"""The base of the committers that complete delayed uploads at job commit (magic, staging, blocklist).

Task commit publishes the attempt's pendingset (its uploads) under the attempt's own name
with an exclusive create, so no attempt can overwrite another's nor change its own after
publishing, and claims the task (:mod:`.claims`). Job commit — :meth:`commit_job`, the
one place it happens — runs the stages of :mod:`.jobcommit`: it loads the committed
pendingsets (:mod:`.pendingsets`), records that it began, applies the conflict mode
(:mod:`.conflicts`), completes every upload (:mod:`.operations`) while it ends the job for
its writers, sweeps what nobody will complete (:mod:`.sweep`) and lists its state, writes
``_SUCCESS``, and deletes the job's state (:mod:`.cleanup`, which also aborts and cleans up).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from datetime import datetime
from typing import Any, ClassVar

from outcommit import capabilities as caps
from outcommit import conflictmodes
from outcommit.capabilities import Capabilities
from outcommit.committer import Committer, JobLogger
from outcommit.context import JobContext, TaskAttemptContext
from outcommit.errors import (
    CommitError,
    ConfigError,
    CorruptFileError,
    TaskCommitError,
)
from outcommit.jobstate import ABORT_NOTE, JobEvidence, attempts_in
from outcommit.multipart import MultipartUploads
from outcommit.paths import is_inside
from outcommit.recovery import JobRecovery
from outcommit.store import Store
from outcommit.success import SuccessData

from . import claims, cleanup, conflicts, jobcommit, pendingsets
from . import sweep as sweeping
from .files import Expectations, PendingSet, digest
from .layout import ALLOWED, CLAIM, COMMIT_STARTED, JOB_MARKER, RESERVED, JobLayout
from .operations import CommitOperations, abortable_commits
from .pendingsets import JobCommits
from .sweep import Sweep


class DelayedCompletionCommitter(Committer):
    """Base of the committers that complete delayed uploads at job commit.

    A store binding says which optional interface carries the uploads
    (:meth:`open_uploads`: S3 multipart uploads, Azure block lists), which capability
    that needs (``requires``) and the names of its two settings.
    """

    #: Pendingsets, claims and the commit record are published with an exclusive create.
    requires: ClassVar[tuple[str, ...]] = (caps.MULTIPART_DELAYED_COMPLETION, caps.CREATE_EXCLUSIVE)
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
    #: The conflict mode applies to the whole destination or to the partitions written.
    conflict_scope: ClassVar[conflicts.Scope] = "destination"
    #: Key: abort every pending upload under the destination at job commit/abort (the sweep).
    abort_pending_key: ClassVar[str] = ""
    #: Key: which of them: all (Hadoop's), or only those initiated before the job began.
    sweep_scope_key: ClassVar[str] = ""
    #: Key: task messages carry up to this many commits inline, else a digest-checked reference.
    inline_limit_key: ClassVar[str] = ""
    #: Complete with ``If-None-Match: *`` when the conflict mode is ``fail``: a file that
    #: appears after the destination was checked is never replaced.
    exclusive_completion: ClassVar[bool] = False
    #: Schemes a pending file's ``uri`` may name; the first is the one written. The store's
    #: binding supplies them (S3's: ``s3a``, ``s3``, ``s3n``).
    uri_schemes: ClassVar[tuple[str, ...]] = ()
    #: Header of a magic path's marker object that carries the file's length, where the
    #: store has object metadata (the binding's: S3A's ``x-hadoop-s3a-magic-data-length``).
    marker_length_header: ClassVar[str] = ""

    def __init__(self, destination: str, store: Store, config: Any = None) -> None:
        super().__init__(destination, store, config)
        # 'a/../b' or 'a//b' names a different key on S3 than a reader expects, and no
        # containment check can hold against it: refused before anything is written. A
        # rooted path's leading '/' (memmp://'s, as memory://'s) is no empty component.
        if any(part in ("", ".", "..") for part in self.dest.removeprefix("/").split("/")):
            raise ConfigError(f"destination {destination!r} has an empty, '.' or '..' path component")
        mp = self.open_uploads(store)
        if mp is None:
            raise CommitError(f"{self.name} needs {', '.join(self.requires)}; {store!r} has none")
        self.mp = mp
        self.ops = CommitOperations(store, mp, self.dest, self.threads)
        # The family's job state (its JobState: job_evidence, leftover_jobs...) is what
        # its recovery reads.
        self.recovery = JobRecovery(self, state=self)
        self.abort_pending = (self.config.get_bool(self.abort_pending_key, True)
                              if self.abort_pending_key else False)
        self.sweep_scope = (self.config.get_choice(self.sweep_scope_key, sweeping.SCOPES, sweeping.ALL)
                            if self.sweep_scope_key else sweeping.ALL)
        self.inline_limit = (self.config.get_int(self.inline_limit_key, 200, minimum=0)
                             if self.inline_limit_key else 200)
        #: Attempts whose task commit failed in this process: their uploads are aborted, so
        #: a repeat of their task commit must fail rather than publish them again.
        self._failed_attempts: set[str] = set()

    def open_uploads(self, store: Store) -> MultipartUploads | None:
        """The store's delayed-completion interface this committer completes (S3 multipart)."""
        return store.multipart()

    # -- where the job's state lives -------------------------------------------------------------
    @property
    def meta(self) -> Store:
        """The store holding pendingsets and markers (staging may use a shared one)."""
        return self.store

    def layout(self, job: JobContext) -> JobLayout:
        return JobLayout.of(self.meta, self.dest, self.job_dir_prefix, job.job_id)

    def expectations(self, job: JobContext) -> Expectations:
        return Expectations(job_id=job.job_id, destination=self.dest, reserved=RESERVED,
                            uri_schemes=self.uri_schemes, max_parts=self.mp.max_parts,
                            max_part_size=self.mp.max_part_size,
                            max_object_size=self.mp.max_object_size)

    # -- job lifecycle ------------------------------------------------------------------------------
    def setup_job(self, job: JobContext) -> None:
        self.reports.check_summary_report_dir()
        if self.conflict_scope == "destination" and not self._commit_began_before(job):
            conflictmodes.check_destination_free_of_others(self, job)
        layout = self.layout(job)
        self.meta.save_json(layout.marker(job), {"jobId": job.job_id, "jobAttempt": job.attempt,
                                                 "committer": self.name, "destination": self.destination})
        self.log_setup(job, self.meta.url(layout.attempt_dir(job)))

    def _commit_began_before(self, job: JobContext) -> bool:
        """Did an earlier attempt of this job begin its job commit?

        Its completed uploads are then the job's own files in the destination: conflict
        mode ``fail`` must let the next attempt recover them (the check at job commit
        still refuses anything that is not the job's).
        """
        return self.job_evidence(job).began(range(job.attempt))

    def require_job(self, job: JobContext, error: type[CommitError]) -> None:
        if not self.meta.exists(self.layout(job).marker(job)):
            raise error(f"job {job.job_id} attempt {job.attempt} is not active at {self.destination}: "
                        "it was never set up, or it has already been committed or aborted")

    # -- task commit --------------------------------------------------------------------------------
    def publish_task(self, task: TaskAttemptContext, pendingset: PendingSet) -> dict[str, Any]:
        """Publish the attempt's pendingset, claim the task, return the commit message.

        On any failure the attempt's uploads are aborted: nothing of it can be committed.
        """
        log = self.logger(task)
        layout = self.layout(task.job)
        path = layout.pendingset(task.job, task.task_id, task.attempt_id)
        created: list[str] = []  # files this call created: removed again if it fails
        if task.attempt_id in self._failed_attempts:
            raise TaskCommitError(f"task attempt {task.attempt_id}: an earlier commit of this attempt "
                                  "failed and aborted its uploads; commit another attempt of the task")
        try:
            # Write, then check: no liveness check before publishing (a stale attempt's
            # files are removed again below), one after it.
            data = pendingset.to_bytes()
            try:
                claims.exclusive(self.meta).create_exclusive(path, data)
                created.append(path)
            except FileExistsError:
                data = self._already_published(path, pendingset)
            # The claim serves only a job commit by discovery, and only once the pendingset it
            # names exists: a claim that landed beside a pendingset that never did (its attempt
            # killed, or its create failed and the claim's removal too) would take the task
            # from every other attempt, and discovery would commit nothing of it, silently
            # (tests/core/committers/delayed/test_task_commit_failures.py).
            if not task.job.task_messages:
                created += claims.claim(layout, task, logger=log)
            # The job may have been committed or aborted while we uploaded: then nothing of
            # ours may stay pending (a late attempt must never leak).
            self.require_job(task.job, TaskCommitError)
        except BaseException:
            self._failed_attempts.add(task.attempt_id)
            self.ops.abort(pendingset.commits, log)
            if path not in created:  # its create may have landed, its answer lost
                self._withdraw(path, pendingset, log)
            # A late attempt's files would recreate a finished job's directory: a stray job
            # directory protects the uploads under the destination from every sweep.
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

    def _withdraw(self, path: str, pendingset: PendingSet, log: JobLogger) -> None:
        """Delete the attempt's pendingset if it is there and names these (now aborted)
        uploads: a create whose answer was lost may have landed, and a job commit by
        discovery would otherwise choose it and fail on uploads that no longer exist."""
        try:
            if self._names_these_uploads(path, pendingset):
                self.meta.delete(path)
        except FileNotFoundError:
            pass
        except Exception:
            log.warning("could not withdraw %s", self.meta.url(path), exc_info=True)

    def _already_published(self, path: str, pendingset: PendingSet) -> bytes:
        """A retried task commit of this same attempt: fine if it says the same."""
        if not self._names_these_uploads(path, pendingset):
            raise TaskCommitError(f"{self.meta.url(path)} was already published with other "
                                  "uploads: this attempt's task commit cannot be repeated") from None
        return self.meta.read_bytes(path)

    def _names_these_uploads(self, path: str, pendingset: PendingSet) -> bool:
        """Does the pendingset published at ``path`` name exactly ``pendingset``'s uploads?"""
        existing = self.meta.load_json(path)
        commits = existing.get("commits") if isinstance(existing, dict) else None
        return isinstance(commits, list) and \
            [c.get("uploadId") if isinstance(c, dict) else None for c in commits] == \
            [c.upload_id for c in pendingset.commits]

    def allow_task_commit(self, task: TaskAttemptContext) -> None:
        """The driver's record that ``task`` (this attempt) is the one allowed to commit.

        Job commit without messages then commits this attempt's pendingset and no other,
        also when an earlier attempt claimed the task and failed (HADOOP-17258).
        """
        claims.allow(self.layout(task.job), task)

    def recover_task(self, task: TaskAttemptContext) -> bool:
        """Carry the task's committed pendingset of the previous job attempt into this one."""
        if task.job.attempt == 0:
            return False
        self.require_job(task.job, TaskCommitError)
        layout, previous = self.layout(task.job), task.job.attempt - 1
        chosen = claims.choose(self.meta, layout.task_dir(task, previous))
        if chosen is None:
            return False
        data = self.meta.read_bytes(chosen)
        pendingset = pendingsets.parse_bytes(data, self.meta.url(chosen), self.expectations(task.job))
        try:  # under the same name in this job attempt's directory
            claims.exclusive(self.meta).create_exclusive(
                self.meta.join(layout.task_dir(task), chosen.rpartition("/")[2]), data)
        except FileExistsError:
            pass
        claims.claim(layout, task, pendingset.attempt_id)
        self.logger(task).info("recovered task %s (%d files) from job attempt %d", task.task_id,
                               len(pendingset.commits), previous)
        return True

    def abort_published(self, task: TaskAttemptContext) -> None:
        """Abort the uploads of this attempt's published pendingset and release its claim."""
        layout = self.layout(task.job)
        path = layout.pendingset(task.job, task.task_id, task.attempt_id)
        try:
            commits = abortable_commits(self.meta, path, self.expectations(task.job))
        except FileNotFoundError:
            return
        self.ops.abort(commits, self.logger(task))
        claims.release(layout, task)
        self.meta.delete(path)

    # -- job commit ---------------------------------------------------------------------------------
    def commit_job(self, job: JobContext,
                   messages: Sequence[Mapping[str, Any]] | None = None) -> SuccessData:
        """Job commit, stage by stage (:mod:`.jobcommit` says what each does and what overlaps)."""
        run = jobcommit.JobCommit.of(self, job, self.reports.commit_started())
        opened = jobcommit.open_commit(run, messages)
        if isinstance(opened, SuccessData):
            return opened  # a finished commit, repeated: its report
        commits: JobCommits | None = None
        try:
            commits = opened.commits
            removed = jobcommit.resolve_conflicts(run, opened)
            completed = jobcommit.complete(run, opened)
            jobcommit.verify(run, commits, opened)
            # The output is complete and visible: nothing below may fail the commit.
            summary = jobcommit.report(run, commits, removed, completed)
        except Exception as exc:
            raise run.failed(exc, commits) from exc
        jobcommit.clean_up(run, completed)
        return summary

    # -- abort and cleanup ----------------------------------------------------------------------------
    def sweep(self, job: JobContext, running: AbstractSet[tuple[str, str]] = frozenset(),
              started: datetime | None = None) -> Sweep:
        """Abort the pending uploads under the destination that no live job may own
        (``running``: this job's uploads being completed meanwhile, left alone).

        Sweep scope before-job: uploads initiated since the job's start (``started``, read
        before the job ended, else now) less :data:`~.sweep.CLOCK_ALLOWANCE` are spared; a
        start that cannot be read aborts no upload of another (CommitError).
        """
        spare_since = None
        if self.spares_newer_uploads():
            started = started or self.job_started(job)
            if started is None:
                raise CommitError(
                    f"{self.sweep_scope_key}={sweeping.BEFORE_JOB}, and the start of job {job.job_id} "
                    f"cannot be told (its _job.json markers are gone: the job has ended, or "
                    f"{self.meta!r} gives no times): no other pending upload is aborted")
            spare_since = started - sweeping.CLOCK_ALLOWANCE
        return sweeping.sweep(self.ops, self.layout(job).root, self.destination, self.logger(job),
                              running, spare_since)

    def spares_newer_uploads(self) -> bool:
        """Does the sweep run, and spare the uploads initiated after the job began?"""
        return self.abort_pending and self.sweep_scope == sweeping.BEFORE_JOB

    def job_started(self, job: JobContext) -> datetime | None:
        """When the job began, by the clock of the store holding its state: the time of the
        ``_job.json`` marker of its earliest attempt still live (written by ``setup_job``,
        deleted when the job ends). None once the job has ended."""
        layout = self.layout(job)
        for attempt in range(job.attempt + 1):
            when = self.meta.modified(layout.marker(job, attempt))
            if when is not None:
                return when
        return None

    def abort_job(self, job: JobContext) -> None:
        self.recovery.begin_abort(job)
        cleanup.abort_job(self, job)

    def cleanup_job(self, job: JobContext) -> None:
        cleanup.clean_up_job(self, job)

    def cleanup_committed_job(self, job: JobContext) -> None:
        cleanup.clean_up_committed_job(self, job)

    def leftover_jobs(self) -> dict[str, list[int]]:
        parent = self.layout(JobContext(self.destination)).root.rpartition("/")[0]
        found = {child.name[len(self.job_dir_prefix):]: attempts_in(self.meta, child.path)
                 for child in self.meta.list_dir(parent)
                 if child.is_dir and child.name.startswith(self.job_dir_prefix)}
        if parent == self.dest:
            return found
        # A directory shared by destinations: only the jobs whose state names this one.
        here = self.store.strip(self.destination).rstrip("/")

        def names_here(job_id: str) -> bool:
            named = self._state_destination(job_id)
            try:
                return named is not None and self.store.strip(named).rstrip("/") == here
            except Exception:  # another scheme or store: not this destination
                return False
        return {job_id: attempts for job_id, attempts in found.items() if names_here(job_id)}

    def _state_destination(self, job_id: str) -> str | None:
        """The destination the job's markers, record or abort note name (None: none says)."""
        root = self.layout(JobContext(self.destination, job_id=job_id)).root
        for info in self.meta.list_files(root):
            if info.path.rpartition("/")[2] in (JOB_MARKER, COMMIT_STARTED, ABORT_NOTE):
                try:
                    data = self.meta.load_json(info.path)
                except (OSError, CorruptFileError):
                    continue
                if isinstance(data, dict) and isinstance(data.get("destination"), str):
                    return str(data["destination"])
        return None

    def published_by_interrupted_commit(self, job: JobContext) -> list[str]:
        """The objects a commit of this job that began completed, proved by their parts'
        etags (what an abort deletes); read-only."""
        layout = self.layout(job)
        if not self.job_evidence(job).began(range(job.attempt + 1)):
            return []
        commits = cleanup.known_commits(layout, self.expectations(job))
        return sorted({c.path for c in commits if is_inside(c.path, self.dest) and self.ops.is_completed(c)})

    def own_pending_uploads(self, job: JobContext) -> list[str]:
        commits = cleanup.known_commits(self.layout(job), self.expectations(job))
        pending = self.ops.pending_lookup() if commits else (lambda _c: False)
        return sorted(f"{self.store.url(c.path)} {c.upload_id}" for c in commits
                      if is_inside(c.path, self.dest) and pending(c))

    def job_evidence(self, job: JobContext) -> JobEvidence:
        layout = self.layout(job)
        return JobEvidence(self.meta, layout.root, lambda attempt: layout.marker(job, attempt),
                           lambda attempts: any(self.meta.exists(layout.commit_started(job, a))
                                                for a in attempts),
                           frozenset({JOB_MARKER, COMMIT_STARTED, CLAIM, ALLOWED, ABORT_NOTE}))

    def cleanup_local(self, job: JobContext) -> None:
        """Remove local state of the job (staging directories)."""
