"""The delayed family's job commit, stage by stage (the manifest committer's stages are the model).

Each stage is a function of one :class:`~.commitrun.JobCommit` (the committer as
:class:`~.commitrun.Committing` names it, the job, its layout, its log, when the commit
began) and of what the stage before it produced:

1. :func:`open_commit` — **load** every committed pendingset (:func:`load`) and
   **record** that the commit began (:func:`record`), beside the job check (and, for
   sweep scope before-job, the read of the job's start): one round trip before the first
   completion. The conflict mode's listings begin as soon as the pendingsets are loaded,
   beside the record. A commit that finished already answers with its report; one that
   was interrupted after it ended the job is resumed (:func:`committed_before`).
2. :func:`resolve_conflicts` — the conflict mode, on those listings.
3. :func:`complete` — every upload, while the job **ends** for its writers (its markers
   go) and, once the last upload is handed out, the **sweep** aborts the pending uploads
   nobody will complete; on S3 the job directory is listed meanwhile, for its deletion.
4. :func:`verify` — when a commit (or an abort) of the job began before this call: every
   file is there as this job made it.
5. :func:`report` — the sweep's outcome, what stays pending, ``_SUCCESS``.
6. :func:`clean_up` — the job's state (its markers are already gone).

The committer (``DelayedCompletionCommitter.commit_job``) runs them in order; a failure
of stages 2 to 5 (or of the store in 1) fails the commit with its success=false report.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from outcommit.errors import CommitError, CorruptFileError, JobCommitError
from outcommit.parallel import run_all
from outcommit.paths import is_inside
from outcommit.progress import Progress
from outcommit.store import FileInfo
from outcommit.success import SuccessData

from . import claims, cleanup, conflicts, fanout, pendingsets
from . import sweep as sweeping
from .commitrun import Committing, JobCommit
from .files import PendingCommit
from .pendingsets import JobCommits
from .sweep import Sweep


@dataclass(frozen=True)
class Opened:
    """What :func:`open_commit` leaves running or found, for the stages after it."""

    loading: Future[tuple[JobCommits, bool]]  # the pendingsets; whether this call made the record
    resumed: bool  # this call resumes a commit that ended the job and was interrupted
    scanning: Sequence[Future[conflicts.Scan | None]]  # the conflict mode's listings, if any
    starting: Future[datetime | None] | None  # the job's start, for a sweep of scope before-job

    @property
    def commits(self) -> JobCommits:
        return self.loading.result()[0]


@dataclass(frozen=True)
class Completed:
    """What ran beside the completions: the sweep (if it ran), the job directory's listing."""

    swept: Sequence[Future[Sweep]]
    listed: Future[list[FileInfo]] | None


# -- 1. load and record, beside the job check ---------------------------------------------------------
def load(run: JobCommit, messages: Sequence[Mapping[str, Any]] | None) -> JobCommits:
    """Every committed pendingset, validated in full before anything is acted on (held
    compressed, streamed after): the task messages', or those found by discovery."""
    c = run.committer

    def check_parts(commit: PendingCommit) -> None:  # part ids the upload cannot have made
        try:
            c.mp.check_parts(commit.upload_id, commit.etags)
        except ValueError as exc:
            raise CorruptFileError(c.store.url(commit.path), "etags", str(exc)) from None

    if messages is not None:
        return pendingsets.from_messages(run.layout, run.job, messages, run.expect, c.threads, check_parts)
    return pendingsets.discover(run.layout, run.job, run.expect, c.threads, check_parts)


def record(run: JobCommit) -> bool:
    """Record that the commit began (an exclusive create); whether this call created it."""
    c, path = run.committer, run.layout.commit_started(run.job)
    # The call's own nonce: a create whose response was lost (retried, then refused as
    # existing) is still this call's.
    nonce = uuid.uuid4().hex
    data = {"jobId": run.job.job_id, "destination": c.destination, "started": time.time(), "call": nonce}
    try:
        claims.exclusive(c.meta).create_exclusive(path, json.dumps(data).encode())
    except FileExistsError:  # an earlier call began this commit, unless it was this one
        there = c.meta.load_json(path)
        return isinstance(there, dict) and there.get("call") == nonce
    return True


def open_commit(run: JobCommit, messages: Sequence[Mapping[str, Any]] | None) -> SuccessData | Opened:
    """Load and record beside the job check: the earlier report of a finished commit, or
    what the next stages need.

    The job check runs beside the pendingsets' loading and the commit record's creation,
    and so do the conflict mode's listings: one round trip before the first completion,
    not two (or 'replace' over old files: two, not three). The listings are not waited
    for before this call knows it may go on.
    """
    c = run.committer
    scanning: list[Future[conflicts.Scan | None]] = []
    beside = ThreadPoolExecutor(2, thread_name_prefix="outcommit-record")

    def load_and_record() -> tuple[JobCommits, bool]:
        loaded = load(run, messages)
        if c.conflict_mode != "append":  # listings only: beside the record's creation
            scanning.append(beside.submit(conflicts.scan, c.ops, c.conflict_mode, c.conflict_scope, loaded))
        return loaded, record(run)

    try:
        loading = beside.submit(load_and_record)
        # Sweep scope before-job: the job's start, read before its markers go (one HEAD).
        starting = beside.submit(c.job_started, run.job) if c.spares_newer_uploads() else None
        refused: BaseException | None = None
        try:
            c.require_job(run.job, JobCommitError)
        except Exception as exc:
            refused = exc
        wait([loading])
        done, resumed = committed_before(run, refused, loading)
    except BaseException as exc:
        beside.shutdown(wait=False, cancel_futures=True)  # read-only listings: let them go
        if isinstance(exc, Exception) and not isinstance(exc, CommitError):
            # The store failed the job check: a failed commit all the same, with its report.
            raise run.failed(exc, None) from exc
        raise
    beside.shutdown(wait=done is None, cancel_futures=done is not None)
    return done if done is not None else Opened(loading, resumed, scanning, starting)


def committed_before(run: JobCommit, refused: BaseException | None,
                     loading: Future[tuple[JobCommits, bool]]) -> tuple[SuccessData | None, bool]:
    """The committer's ``recovery.committed_before``, where job commit may also go on after an
    interrupted one ended the job for its writers (its record says it began, no
    ``_SUCCESS`` that it finished: a finished commit must never run again, ``replace`` first).

    ``refused``: the job check's refusal (or its failure), made beside ``loading``
    (the pendingsets, then the commit record: whether this call created it). A record
    a refused call created is deleted again, before anything else: only a record that
    was there before says a commit began. Returns (the earlier report, or None; whether this
    call resumes such a commit)."""
    c, job = run.committer, run.job
    created = loading.exception() is None and loading.result()[1]
    path = run.layout.commit_started(job)
    if refused is not None and created:
        try:
            c.meta.delete(path)
        except Exception:
            run.log.warning("could not delete %s, made beside a refused job check",
                            c.meta.url(path), exc_info=True)
    if refused is not None and not isinstance(refused, JobCommitError):
        raise refused  # the check itself failed (the store): as it would alone

    def check() -> None:
        if refused is not None:
            raise refused
    try:
        return c.recovery.committed_before(job, check), False
    except JobCommitError as refusal:
        there_before = not created if loading.exception() is None else c.meta.exists(path)
        if not there_before:
            raise
        c.recovery.refuse_resume_if_aborted(job, f"{refusal}: ")
        if loading.exception() is None and loading.result()[0].tasks == 0:
            # A real interrupted commit keeps its pendingsets until after _SUCCESS; a
            # record alone is one a refused call could not delete (a job aborted or
            # finished): resuming it would commit nothing and report success.
            raise JobCommitError(f"{refusal}: no committed task is left to resume") from None
        return None, True


# -- 2. resolve conflicts -----------------------------------------------------------------------------
def resolve_conflicts(run: JobCommit, opened: Opened) -> int:
    """Apply the conflict mode on the listings made beside the record; files deleted."""
    c, commits = run.committer, opened.commits
    if opened.resumed and c.conflict_mode != "append" and not c.ops.any_pending(commits):
        # Every upload is complete: the commit resumed got past its completions, so its
        # conflict handling ran, and running it again ('replace') would delete what was
        # written since (its _SUCCESS may be hidden by a later job's).
        run.log.info("resuming a job commit whose uploads are all complete: conflict mode %s "
                     "already ran", c.conflict_mode)
        return 0
    return conflicts.resolve(c.ops, c.conflict_mode, c.conflict_scope, commits, c.destination, run.log,
                             scanned=opened.scanning[0].result() if opened.scanning else None)


# -- 3. complete, end and sweep -----------------------------------------------------------------------
def complete(run: JobCommit, opened: Opened) -> Completed:
    """Complete every upload; beside them (two requests at most: JOB_COMMIT_SIDE_REQUESTS),
    after the commit record exists:

    - the job ends for its writers (its markers go): a straggler closing a file from now
      on aborts its own upload, and one that checked earlier has saved it where the
      sweep and the listing after ``_SUCCESS`` find it;
    - then, once the last upload is handed to the pool, the sweep, which leaves the ones
      still completing alone;
    - on S3, the job directory is listed, so that a batch deletes it after ``_SUCCESS``
      (beside a second listing, which finds anything written since).
    """
    c, commits = run.committer, opened.commits
    progress = Progress("completing uploads", len(commits), run.log, c.config, unit="upload")
    running: set[tuple[str, str]] = set()
    swept: list[Future[Sweep]] = []
    with ThreadPoolExecutor(1, thread_name_prefix="outcommit-end") as ending, \
            ThreadPoolExecutor(1, thread_name_prefix="outcommit-state") as listing:
        ended = ending.submit(cleanup.end_job, run.layout, run.job)
        listed = (listing.submit(run.layout.meta.list_files, run.layout.root)
                  if cleanup.deletes_listed(run.layout.meta) else None)

        def sweep_beside() -> None:
            if c.abort_pending:
                swept.append(ending.submit(_sweep_after_start, run, running, opened.starting))
        exclusive = c.exclusive_completion and c.conflict_mode == "fail"
        try:
            fan_out = fanout.processes(c.config)
            if fan_out > 1 and len(commits) > 1:
                fanout.complete_all(c, commits, fan_out, progress, exclusive, running, sweep_beside)
            else:
                c.ops.complete_all(commits, progress, if_none_match=exclusive, unfinished=running,
                                   when_all_started=sweep_beside)
        finally:
            progress.close()
        ended.result()
    return Completed(swept, listed)


def _sweep_after_start(run: JobCommit, running: AbstractSet[tuple[str, str]],
                       starting: Future[datetime | None] | None) -> Sweep:
    """The sweep beside the completions, with the job's start read before it ended."""
    return run.committer.sweep(run.job, running, starting.result() if starting is not None else None)


# -- 4. verify ----------------------------------------------------------------------------------------
def verify(run: JobCommit, commits: JobCommits, opened: Opened) -> None:
    """A commit of this job began before this call (a resumed or retried call, an earlier
    attempt's), or an abort of it did: objects that commit completed may have been deleted
    since (the abort, another job's ``replace`` on the destination), and completing such an
    upload again may answer success without making the object again (S3 can). Every file
    must be in the destination as this job's upload made it (its etag) before ``_SUCCESS``
    names it: one request per file then. Otherwise every completion was this call's own,
    and nothing is checked (a first commit, a later attempt whose predecessors never began
    theirs: one request per earlier attempt to know)."""
    c, job = run.committer, run.job
    if not began_before(run, opened):
        return

    def missing(commit: PendingCommit) -> PendingCommit | None:
        return None if c.ops.is_completed(commit) else commit

    gone = [m for m in run_all(missing, commits, c.threads, name="outcommit-verify") if m]
    if gone:
        raise CommitError(f"{len(gone)} completed file(s) of job {job.job_id} are not in the "
                          f"destination as this job made them (an abort of it that began, "
                          f"another job's replace), e.g. {c.store.url(gone[0].path)}: abort the job")


def began_before(run: JobCommit, opened: Opened) -> bool:
    """Did a commit of this job, or an abort of it, begin before this call?"""
    c, job = run.committer, run.job
    if opened.resumed or not opened.loading.result()[1]:  # this attempt's record was there
        return True
    return job.attempt > 0 and (c.recovery.abort_began_any_attempt(job) or any(
        c.meta.exists(run.layout.commit_started(job, attempt)) for attempt in range(job.attempt)))


# -- 5. report ----------------------------------------------------------------------------------------
def report(run: JobCommit, commits: JobCommits, removed: int, completed: Completed) -> SuccessData:
    """Write ``_SUCCESS``: the output is complete and visible, so nothing in the sweep's
    outcome nor in what stays pending may fail the commit (both are reported)."""
    c = run.committer
    metrics, state = swept_metrics(run, completed.swept)
    if state != "done":  # what the sweep did not abort: the job's own, then what is left
        abort_own_leftovers(run)
        metrics = {"uploads.pending.remaining": pending_remaining(run, state)}
    return c.reports.write_success(
        run.job, (c.store.url(commit.path) for commit in commits),
        metrics={"tasks.committed": commits.tasks, "bytes.committed": commits.length,
                 "conflict.deleted": removed, **metrics,
                 "commit.duration.ms": int((time.monotonic() - run.started) * 1000)},
        diagnostics={"uploads.sweep": state})


def swept_metrics(run: JobCommit, swept: Sequence[Future[Sweep]]) -> tuple[dict[str, int], str]:
    """The sweep that ran beside the completions (or runs now), as (metrics, its state).

    A failed sweep must not fail a job whose output is complete; a skipped or disabled
    one must not leave uploads pending silently (they cost storage until aborted).
    """
    c = run.committer
    if not c.abort_pending:
        return {}, (f"disabled ({c.abort_pending_key}=false)" if c.abort_pending_key else "not applicable")
    try:
        result = swept[0].result() if swept else c.sweep(run.job)
    except Exception as exc:
        run.log.warning("aborting pending uploads under %s failed", c.destination, exc_info=True)
        return {}, f"failed: {type(exc).__name__}: {exc}"
    if not result.skipped and not result.spared:
        return {"uploads.aborted.other": result.aborted}, "done"
    return {}, "; ".join(
        ([f"skipped {result.skipped} uploads that may belong to live jobs "
          f"({', '.join(result.owners[:3])})"] if result.skipped else [])
        + ([f"spared {result.spared} uploads initiated after the job began "
            f"({c.sweep_scope_key}={sweeping.BEFORE_JOB})"] if result.spared else []))


def abort_own_leftovers(run: JobCommit) -> None:
    """This job's own leftovers (uncommitted attempts), which no sweep covered."""
    c = run.committer
    try:
        if c.mp.abortable:
            c.ops.abort(cleanup.known_commits(run.layout, run.expect), run.log)
    except Exception:
        run.log.warning("aborting the job's uncommitted uploads failed", exc_info=True)


def pending_remaining(run: JobCommit, state: str) -> int:
    """How many uploads stay pending under the destination (-1: cannot tell), logged."""
    c = run.committer
    try:
        remaining = sum(1 for p in c.mp.list_pending(c.dest + "/") if is_inside(p.path, c.dest))
    except Exception:
        run.log.warning("could not list pending uploads under %s", c.destination, exc_info=True)
        remaining = -1
    if remaining:
        run.log.warning("%s uploads remain pending under %s (sweep %s): see 'outcommit uploads list "
                        "%s'", "some" if remaining < 0 else remaining, c.destination, state, c.destination)
    return remaining


# -- 6. clean up --------------------------------------------------------------------------------------
def clean_up(run: JobCommit, completed: Completed) -> None:
    """Every upload of this job is now complete or aborted (by the sweep, or in
    :func:`report`), its markers went in :func:`complete`: its state goes."""
    cleanup.delete_after_commit(run.committer, run.job, completed.listed)


# What every stage shares is named here too: the committer reads the stages from one module.
__all__ = ["Committing", "Completed", "JobCommit", "Opened", "clean_up", "complete", "open_commit",
           "report", "resolve_conflicts", "verify"]
