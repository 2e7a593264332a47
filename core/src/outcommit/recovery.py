"""What a job's state tells after a failure, and what acting on it must respect: the
abort note (an abort began, or kept the state as evidence), a commit that began and was
interrupted, a finished commit called again, and what ``outcommit jobs`` reads (the jobs
left, what aborting one would remove: :class:`AbortPreview`).

:class:`JobRecovery` is an object each committer owns (``committer.recovery``) and calls:
every committer answers these the same way, from what its family keeps of a job, the
:class:`JobState` it hands over (``JobDirectoryCommitter`` and the delayed family are their
own; a committer that keeps none gets :class:`NoJobState`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from . import jobstate
from .context import JobContext
from .errors import CommitError, JobCommitError
from .jobstate import JobEvidence
from .reporting import JobReports
from .store import Store
from .success import SuccessData


class JobState(Protocol):
    """What a committer family keeps of a job, as recovery reads it."""

    def job_evidence(self, job: JobContext) -> JobEvidence | None:
        """Where the job's state says what happened to it (None: the family keeps none)."""

    def cleanup_committed_job(self, job: JobContext) -> None:
        """``cleanup_job`` of a job that an engine's own commit point says committed
        (a streaming batch log without ``_SUCCESS``): its state goes, whatever it shows
        of a job commit that began (``cleanup_job`` would keep that as evidence)."""

    def leftover_jobs(self) -> dict[str, list[int]]:
        """Jobs whose temporary state is on the store, by job id: the attempts found
        (``outcommit jobs``: what an interrupted or failed abort left for another)."""

    def published_by_interrupted_commit(self, job: JobContext) -> list[str]:
        """Destination files (store paths) an interrupted commit of ``job`` published, which
        its abort deletes; read-only."""

    def own_pending_uploads(self, job: JobContext) -> list[str]:
        """The job's own pending uploads, which its abort aborts (``url upload-id``); read-only."""


class Recovered(Protocol):
    """What recovery reads of the committer whose jobs it recovers (``Committer``)."""

    @property
    def name(self) -> str: ...
    @property
    def destination(self) -> str: ...
    @property
    def store(self) -> Store: ...
    @property
    def reports(self) -> JobReports: ...

    def logger(self, job: JobContext) -> logging.LoggerAdapter[Any]: ...
    def remove_temporary_root(self) -> None: ...
    def cleanup_job(self, job: JobContext) -> None: ...


class NoJobState:
    """The :class:`JobState` of a committer that keeps none (one made from ``Committer``
    directly): no evidence, no leftover jobs, nothing an abort would remove."""

    def __init__(self, committer: Recovered) -> None:
        self.committer = committer

    def job_evidence(self, job: JobContext) -> JobEvidence | None:
        return None

    def cleanup_committed_job(self, job: JobContext) -> None:
        self.committer.cleanup_job(job)

    def leftover_jobs(self) -> dict[str, list[int]]:
        return {}

    def published_by_interrupted_commit(self, job: JobContext) -> list[str]:
        return []

    def own_pending_uploads(self, job: JobContext) -> list[str]:
        return []


class JobRecovery:
    """Recovery of one committer's jobs, from the state its family keeps (``state``)."""

    def __init__(self, committer: Recovered, state: JobState | None = None) -> None:
        self.committer = committer
        self.state: JobState = state if state is not None else NoJobState(committer)

    def kept_on_abort(self, job: JobContext) -> bool:
        """Abort, after a commit began: did that commit finish (its ``_SUCCESS``)? Then
        its output stays and only the job's state is deleted (said in the log)."""
        if self.committer.reports.own_success(job) is None:
            return False
        self.committer.logger(job).info("abort: the job's commit finished (its _SUCCESS is in %s): its "
                                        "output stays, only its temporary state is deleted",
                                        self.committer.destination)
        return True

    def begin_abort(self, job: JobContext) -> None:
        """Start of ``abort_job``, before the job ends: the abort's note (:data:`ABORT_NOTE`)
        in the job's state. An abort that dies midway (its process killed after the markers
        went) then still says that this job attempt was aborted, so no later ``commit_job``
        resumes its commit. The note goes with the state when the abort finishes. Nothing is
        written for a job that has no state. Never raises: it runs on failure paths."""
        evidence = self.state.job_evidence(job)
        if evidence is None:
            return
        try:
            if evidence.store.exists(evidence.root):
                self._save_abort_note(job, evidence, kept=False)
        except Exception:
            self.committer.logger(job).warning("could not save %s", evidence.store.url(evidence.note),
                                               exc_info=True)

    def _save_abort_note(self, job: JobContext, evidence: JobEvidence, kept: bool,
                         error: BaseException | None = None) -> None:
        jobstate.save_abort_note(evidence, job, self.committer.destination, self.committer.name, kept,
                                 error)

    def interrupted_commit_kept(self, job: JobContext, error: BaseException | None = None,
                                aborted: bool = False, began: bool = True) -> None:
        """Abort or cleanup met a job commit that began and was neither finished (no
        ``_SUCCESS`` of the job) nor undone: the job's state, the only evidence of what
        that commit published, stays, so that aborting the job again removes those files.
        Deleting it would leave them visible for good.

        ``aborted``: an abort kept it, and says so in its note (:data:`ABORT_NOTE`): this
        job attempt was aborted, so its commit is never resumed, and ``outcommit jobs
        abort`` may act on it without ``--interrupted``. A cleanup after such an abort
        logs no second error. ``began=False``: the store could not even tell whether a
        commit began (``error``): the state stays all the same, and the log says so.
        """
        evidence = self.state.job_evidence(job)
        state = evidence.store.url(evidence.root) if evidence is not None else "its temporary area"
        if aborted and evidence is not None:
            try:
                self._save_abort_note(job, evidence, kept=True, error=error)
            except Exception:
                self.committer.logger(job).warning("could not save %s",
                                                   evidence.store.url(evidence.note), exc_info=True)
        elif not aborted and evidence is not None and self._kept_by_abort(job):
            self.committer.logger(job).info("the job's state stays at %s, as its abort said", state)
            return
        because = f" ({type(error).__name__}: {error})" if error is not None else ""
        what = ("the interrupted job commit into %s was not undone%s: files it published may be "
                "visible" if began else
                "could not tell whether a job commit into %s began%s: if one did, files it "
                "published may be visible")
        c = self.committer
        c.logger(job).error(
            what + ". The job's state stays at %s: abort job %s again ('outcommit jobs abort %s "
            "%s --committer %s --force', with the job's --conf settings) to remove them",
            c.destination, because, state, job.job_id, c.destination, job.job_id, c.name)

    def _abort_note(self, job: JobContext) -> dict[str, Any] | None:
        """The abort note of this job attempt or a later one (:func:`.jobstate.abort_note`)."""
        return jobstate.abort_note(self.state.job_evidence(job), job)

    def aborted(self, job: JobContext) -> bool:
        """Did an abort of this job attempt (or of a later one) begin, and either not
        finish or keep the state?"""
        return self._abort_note(job) is not None

    def refuse_resume_if_aborted(self, job: JobContext, refusal: str = "") -> None:
        """A job commit about to resume an interrupted one: refused if an abort of the job
        began since (its note). That abort may have removed part of what the commit
        published, or died before undoing it: either way the job failed, and resuming
        would report a success for output that is not complete."""
        if self.aborted(job):
            raise JobCommitError(f"{refusal}job {job.job_id} was aborted (an abort began and "
                                 "did not finish, or kept its state as evidence): its commit is "
                                 "never resumed; abort it again to remove its output")

    def abort_began_any_attempt(self, job: JobContext) -> bool:
        """Is there an abort note of any attempt of the job (an abort began and did not
        finish, or kept the state)? One request, on recovery paths only."""
        evidence = self.state.job_evidence(job)
        return evidence is not None and evidence.store.exists(evidence.note)

    def _kept_by_abort(self, job: JobContext) -> bool:
        """Did an abort keep this job's state and log why (its note says so)?"""
        try:
            return (self._abort_note(job) or {}).get("kept") is True
        except Exception:
            return False

    def job_status(self, job_id: str, attempts: Sequence[int]) -> str:
        """What the state of job ``job_id`` says (``outcommit jobs``; :func:`.jobstate.status`)."""
        job = JobContext(self.committer.destination, job_id=job_id, attempt=max(attempts, default=0))
        return jobstate.status(self.state.job_evidence(job), job, attempts,
                               lambda: self.committer.reports.own_success(job) is not None)

    def delete_foreign_state(self, job_id: str) -> None:
        """Delete the directory of "job" ``job_id``, state that holds no file outcommit
        writes (``outcommit jobs abort --foreign``): that directory only, not what its
        writer may have published or left pending elsewhere (nothing tells what that is)."""
        evidence = self.state.job_evidence(JobContext(self.committer.destination, job_id=job_id))
        if evidence is None:
            return
        if evidence.is_ours():  # checked again: a job may have been set up there meanwhile
            raise CommitError(f"{evidence.store.url(evidence.root)} holds outcommit's state "
                              "now: it is not foreign; list the jobs again")
        evidence.store.delete(evidence.root, recursive=True)
        self.committer.remove_temporary_root()

    def job_owner(self, job_id: str) -> str | None:
        """The committer that set job ``job_id`` up, as its markers say
        (:func:`.jobstate.owner`); None when no marker is left or this committer keeps no state.

        ``outcommit jobs`` acts on a job through the committer that made it: ``v1``,
        ``v2`` and ``manifest`` share ``_temporary/`` and misread each other's state (to
        ``v1``, a live ``manifest`` job looked not committed, and was aborted)."""
        job = JobContext(self.committer.destination, job_id=job_id)
        return jobstate.owner(self.state.job_evidence(job))

    def committed_before(self, job: JobContext, require: Callable[[], object],
                         later_attempts: bool = True) -> SuccessData | None:
        """Start of ``commit_job``: run the job check ``require``; the report of the job's
        finished commit if this call repeats it, else None (go on committing).

        A commit that wrote ``_SUCCESS`` and died deleting the job's state leaves a job
        that is no longer active (its markers went first) or, for a later job attempt, one
        set up again. Calling ``commit_job`` again, or from that attempt, then returns the
        earlier report and deletes what is left (``job-commit.repeatable``); where the job
        check refuses and no report names the job, the refusal is raised (also when the
        report cannot be read). ``later_attempts=False``: a later attempt commits anyway
        (v2, whose tasks published their output again).
        """
        try:
            require()
        except JobCommitError as refused:
            try:
                done = self.finished_commit(job)
            except Exception as exc:
                raise refused from exc
            if done is None:
                raise
            return done
        return self.finished_commit(job) if later_attempts and job.attempt > 0 else None

    def finished_commit(self, job: JobContext) -> SuccessData | None:
        """The job's own ``_SUCCESS`` report, once its leftover state is deleted; None if
        no ``_SUCCESS`` names the job."""
        done = self.committer.reports.own_success(job)
        if done is not None:
            self.committer.logger(job).info("job already committed: returning its _SUCCESS report")
            self.state.cleanup_committed_job(job)
        return done

    def abort_preview(self, job: JobContext) -> AbortPreview:
        """What aborting ``job`` would remove, read from the store and changing nothing
        (``outcommit jobs abort --dry-run``): its state's files; the destination files its
        interrupted commit published, as its state proves them (none once its ``_SUCCESS``
        says it committed: that output stays); its own pending uploads."""
        evidence = self.state.job_evidence(job)
        state = [] if evidence is None else [evidence.store.url(f.path)
                                             for f in evidence.store.list_files(evidence.root)]
        published = ([] if self.committer.reports.own_success(job) is not None
                     else self.state.published_by_interrupted_commit(job))
        return AbortPreview(state, [self.committer.store.url(p) for p in published],
                            self.state.own_pending_uploads(job))


@dataclass(frozen=True)
class AbortPreview:
    """What an abort of a job would remove (``JobRecovery.abort_preview``), as URLs."""

    state: list[str]       # the files of the job's temporary state
    published: list[str]   # destination files its interrupted commit published
    uploads: list[str]     # its own pending uploads: "url upload-id"
