"""Committers that keep per-job state under ``<dest>/_temporary/<jobId>/<attempt>/``
(v1, v2, manifest): the layout, its markers, cleanup, and the abort's rollback through
the publish journal."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence

import fsspec

from . import conflictmodes
from .committer import TEMPORARY_DIR, Committer
from .committers import journal
from .config import Config
from .context import JobContext, TaskAttemptContext
from .errors import CommitError, TaskCommitError
from .jobstate import ABORT_NOTE, JOB_MARKER, JobEvidence, attempts_in
from .livewrites import LiveWritesFileSystem
from .recovery import JobRecovery
from .store import Store

log = logging.getLogger(__name__)


class JobDirectoryCommitter(Committer):
    """Committers that keep per-job state under ``<dest>/_temporary/<jobId>/<attempt>/``.

    One directory per job id, so concurrent jobs to one destination never meet. A marker
    file written at job setup and deleted with the job directory lets task and job calls
    refuse to act for a job that was never set up, or is already committed or aborted.
    The family's job state (:class:`~outcommit.recovery.JobState`) is what its recovery reads.
    """

    def __init__(self, destination: str, store: Store, config: Config | None = None) -> None:
        super().__init__(destination, store, config)
        self.recovery = JobRecovery(self, state=self)

    def job_dir(self, job_id: str) -> str:
        return self.store.join(self.dest, TEMPORARY_DIR, job_id)

    def attempt_dir_name(self, attempt: int) -> str:
        return str(attempt)

    def job_attempt_dir(self, job: JobContext, attempt: int | None = None) -> str:
        number = job.attempt if attempt is None else attempt
        return self.store.join(self.job_dir(job.job_id), self.attempt_dir_name(number))

    def check_destination_on_setup(self, job: JobContext) -> None:
        """Conflict mode ``fail`` at job setup, unless the job's publish has begun.

        A later attempt of a job whose commit began (or finished: its ``_SUCCESS``) finds
        the job's own files there.
        """
        if not journal.exists(self.store, self.job_dir(job.job_id)):
            conflictmodes.check_destination_free_of_others(self, job)

    # -- the publish journal (rename committers) --------------------------------------
    def load_journal(self, job: JobContext) -> journal.Journal | None:
        return journal.load(self.store, self.job_dir(job.job_id), job.job_id, self.dest)

    def save_journal(self, job: JobContext, entries: Iterable[journal.Entry]) -> journal.Journal:
        return journal.save(self.store, self.job_dir(job.job_id), job.job_id, entries)

    def journal_sources(self, job: JobContext) -> Callable[[journal.Entry], Sequence[str]]:
        """Where a journaled file may still wait to be published (not moved yet)."""
        return lambda entry: [entry.source]

    def setup_job(self, job: JobContext) -> None:
        self.reports.check_summary_report_dir()
        self.check_destination_on_setup(job)
        self.sweep_ended_jobs(job)
        attempt_dir = self.job_attempt_dir(job)
        self.store.mkdirs(attempt_dir)
        self.store.save_json(self.store.join(attempt_dir, JOB_MARKER),
                             {"jobId": job.job_id, "jobAttempt": job.attempt,
                              "committer": self.name, "destination": self.destination})
        self.log_setup(job, self.store.url(attempt_dir))

    def sweep_ended_jobs(self, job: JobContext) -> None:
        """Delete what attempts of ended jobs left under ``_temporary`` (never raises).

        A task attempt killed between a file's write and the check after it
        (:mod:`outcommit.livewrites`) leaves that file in its job's directory after the
        job's cleanup; the next job on the destination removes it here. Only a directory
        that is certainly an ended job of ours goes (:func:`ended_job_of_ours`): never a
        live job's (two jobs may share the destination), never state an abort needs, never
        another tool's. One listing of ``_temporary`` when nothing is there.
        """
        root = self.store.join(self.dest, TEMPORARY_DIR)
        try:
            others = [c for c in self.store.list_dir(root) if c.is_dir and c.name != job.job_id]
        except FileNotFoundError:
            return
        except Exception:
            self.logger(job).warning("could not list %s for ended jobs' state", root, exc_info=True)
            return
        for other in others:
            try:
                if ended_job_of_ours(self.store, other.path, other.name):
                    self.store.delete(other.path, recursive=True)
                    self.logger(job).warning("deleted %s: temporary state of ended job %s, left by "
                                             "an attempt killed after the job's cleanup",
                                             self.store.url(other.path), other.name)
            except FileNotFoundError:
                pass  # swept meanwhile: by another job's setup, a task of this job, or its own cleanup
            except Exception:
                self.logger(job).warning("could not sweep %s", other.path, exc_info=True)

    def job_marker(self, job: JobContext, attempt: int | None = None) -> str:
        return self.store.join(self.job_attempt_dir(job, attempt), JOB_MARKER)

    def is_active(self, job: JobContext) -> bool:
        return self.store.exists(self.job_marker(job))

    def require_job(self, job: JobContext, error: type[CommitError]) -> str:
        """The job attempt directory, or ``error`` when the job is not active."""
        if not self.is_active(job):
            raise error(
                f"job {job.job_id} attempt {job.attempt} is not active at {self.destination}: "
                "it was never set up, or it has already been committed or aborted")
        return self.job_attempt_dir(job)

    def cleanup_job(self, job: JobContext) -> None:
        """End the job, then delete its temporary state (never raises: runs on failure paths).

        Unless a job commit began (its journal) and neither finished (the job's
        ``_SUCCESS``) nor was undone by ``abort_job`` (which deletes the journal with the
        rest): that state is the evidence an abort needs, so only the job ends.
        """
        began = False
        try:
            began = journal.exists(self.store, self.job_dir(job.job_id))
            interrupted, error = began and self.reports.own_success(job) is None, None
        except Exception as exc:  # cannot tell: keep what may be evidence
            interrupted, error = True, exc
        if interrupted:
            self.end_job(job)
            self.recovery.interrupted_commit_kept(job, error, began=began)
            return
        self.end_job_and_delete_state(job)

    def cleanup_committed_job(self, job: JobContext) -> None:
        self.end_job_and_delete_state(job)

    def job_evidence(self, job: JobContext) -> JobEvidence:
        job_dir = self.job_dir(job.job_id)
        return JobEvidence(self.store, job_dir, lambda attempt: self.job_marker(job, attempt),
                           lambda _attempts: journal.exists(self.store, job_dir),
                           frozenset({JOB_MARKER, ABORT_NOTE, journal.JOURNAL_FILE}),
                           (f"attempt_{job.job_id}_", f"task_{job.job_id}_"))

    def leftover_jobs(self) -> dict[str, list[int]]:
        root = self.store.join(self.dest, TEMPORARY_DIR)
        if not self.store.exists(root):
            return {}
        return {job.name: attempts_in(self.store, job.path)
                for job in self.store.list_dir(root) if job.is_dir}

    def end_job(self, job: JobContext) -> bool:
        """Delete the job's markers, every attempt's (never raises). False: it failed."""
        try:
            for attempt in range(job.attempt + 1):
                self.store.delete(self.job_marker(job, attempt))
        except Exception:
            self.logger(job).warning("ending job %s failed", job.job_id, exc_info=True)
            return False
        return True

    def end_job_and_delete_state(self, job: JobContext) -> None:
        """End the job, then delete its temporary state (never raises).

        The job's markers go first. A straggling attempt checks the marker *after* each
        write that it makes (write, then check): one that still saw the marker wrote
        before the deletion below listed the job's directory, so it is deleted with it;
        one that did not removes what it wrote itself (``abandon_if_job_ended``).
        """
        if self.end_job(job):
            self.delete_ended_state(job)

    def delete_ended_state(self, job: JobContext) -> None:
        """Delete the job's temporary state, once it has ended (never raises)."""
        try:
            self.delete_job_state(job)
            self.remove_temporary_root()
        except Exception:
            self.logger(job).warning("cleanup of %s failed", self.job_dir(job.job_id), exc_info=True)

    def delete_job_state(self, job: JobContext) -> None:
        """Delete the job's temporary directory, all attempts."""
        self.store.delete(self.job_dir(job.job_id), recursive=True)

    def prune_job_dir(self, job: JobContext) -> None:
        """Remove the empty directories a straggler left in a finished job's tree.

        Only directories that are empty go (``Store.delete_empty_dir``): never a file, and
        never the directory of a job that is still running.
        """
        def prune(path: str) -> None:
            for child in self.store.list_dir(path):
                if child.is_dir:
                    prune(child.path)
            self.store.delete_empty_dir(path)

        prune(self.job_dir(job.job_id))
        self.remove_temporary_root()

    def abandon_if_job_ended(self, task: TaskAttemptContext, created: Sequence[str],
                             doing: str = "committing") -> None:
        """Write, then check: raise if the job ended while ``task`` created ``created``.

        A straggling attempt whose job was committed or aborted meanwhile must not leave
        its files in the finished job's directory: they are deleted, with the empty
        directories they needed, before the error is raised.
        """
        if self.is_active(task.job):
            return
        for path in created:
            self.store.delete(path, recursive=True)
        self.prune_job_dir(task.job)
        raise TaskCommitError(f"job {task.job_id} ended while task attempt {task.attempt_id} was "
                              f"{doing} to {self.destination}: its output was discarded")

    def abandon_write_if_job_ended(self, task: TaskAttemptContext, path: str) -> None:
        """The check after one file's write (:mod:`outcommit.livewrites`): if the job
        ended, the file goes and the write fails. One request while the job is live, a
        read of its marker: a HEAD would cost GCS's client an object and a listing request."""
        try:
            self.store.read_bytes(self.job_marker(task.job))
            return
        except FileNotFoundError:
            pass
        self.abandon_if_job_ended(task, [path], doing="writing")

    def published_by_interrupted_commit(self, job: JobContext) -> list[str]:
        """The journal's files this job moved into the destination (what ``abort_job``
        rolls back); a corrupt journal raises, as the abort would fail on it."""
        published = self.load_journal(job)
        if published is None:
            return []
        sources = self.journal_sources(job)
        return [entry.dest for entry in published.entries
                if journal.published_by_us(self.store, entry, sources(entry))]

    def own_pending_uploads(self, job: JobContext) -> list[str]:
        """None: the family's tasks write whole files, never uploads left pending."""
        return []

    def abort_job(self, job: JobContext) -> None:
        """Remove what an interrupted job commit already published, then the job's state.

        A commit that wrote the job's ``_SUCCESS`` was not interrupted but finished (its
        driver died cleaning up): its output stays, and only the state is deleted. Where
        the interrupted commit cannot be undone (the store fails, its journal is corrupt,
        ``_SUCCESS`` cannot be read), the job ends but its state stays, for another abort.
        Never raises: it runs on failure paths. Its note first, then the markers (from
        now on stragglers stop), then the rollback: an abort that dies midway leaves a job
        that is over and says it was aborted.
        """
        self.recovery.begin_abort(job)
        ended = self.end_job(job)
        try:
            published = self.load_journal(job)
            if published is not None and not self.recovery.kept_on_abort(job):
                removed = journal.rollback(self.store, published, self.journal_sources(job))
                self.logger(job).warning("abort: removed %d files an interrupted job commit had "
                                         "published to %s", removed, self.destination)
        except Exception as exc:
            self.recovery.interrupted_commit_kept(job, exc, aborted=True)
            return
        if ended:  # else a straggler may still write: the state stays for another cleanup
            self.delete_ended_state(job)

    # -- task: the attempt writes into its own directory ---------------------------------
    def task_attempt_dir(self, task: TaskAttemptContext) -> str:
        raise NotImplementedError

    def work_path(self, task: TaskAttemptContext) -> str:
        return self.task_attempt_dir(task)

    def filesystem(self, task: TaskAttemptContext) -> fsspec.AbstractFileSystem:
        """The store's filesystem, whose files written under the job's directory check the
        job after their write (:mod:`outcommit.livewrites`: an attempt the engine stopped
        waiting for may write after the job's cleanup, and be killed before its abort)."""
        return LiveWritesFileSystem(self, task, self.store.fs, check_at_open=self.store.file_at_open)

    def setup_task(self, task: TaskAttemptContext) -> None:
        self.require_job(task.job, TaskCommitError)
        self.store.mkdirs(self.task_attempt_dir(task))

    def needs_task_commit(self, task: TaskAttemptContext) -> bool:
        return bool(self.store.list_files(self.task_attempt_dir(task)))

    def abort_task(self, task: TaskAttemptContext) -> None:
        try:
            self.store.delete(self.task_attempt_dir(task), recursive=True)
            if not self.is_active(task.job):
                # A straggler of a finished job: the directories its writes created go too.
                self.prune_job_dir(task.job)
        except Exception:  # abort never raises: it runs on failure paths
            self.logger(task).warning("abort of %s failed", task.attempt_id, exc_info=True)


def ended_job_of_ours(store: Store, job_dir: str, job_id: str) -> bool:
    """Is ``job_dir`` (``_temporary/<job_id>``) the state of an ended job of this family?

    Ended: no job attempt holds a liveness marker (whichever committer of the family made
    it: ``0/`` or ``00/``), and no publish journal or abort note is there (an interrupted
    commit's evidence, which its abort needs). Ours: a task's or task attempt's name for
    the job (``task_<job_id>_...``, ``attempt_<job_id>_...``) is in an attempt directory
    or one level below it; Hadoop's ``_temporary/0`` holds none, and a job being set up
    right now has none yet (its marker comes before any task). Listings one level at a
    time: a live job is told by its marker without listing its output.
    """
    own = (f"attempt_{job_id}_", f"task_{job_id}_")

    def names(path: str) -> dict[str, bool]:
        return {c.name: c.is_dir for c in store.list_dir(path)}

    top = names(job_dir)
    if top.keys() & {journal.JOURNAL_FILE, ABORT_NOTE}:
        return False
    ours = False
    for attempt in (store.join(job_dir, n) for n, is_dir in top.items() if is_dir):
        inside = names(attempt)
        if JOB_MARKER in inside:
            return False
        ours = ours or any(n.startswith(own) for n in inside) or any(
            n.startswith(own) for d, is_dir in inside.items() if is_dir
            for n in names(store.join(attempt, d)))
    return ours


__all__ = ["JobDirectoryCommitter", "ended_job_of_ours"]
