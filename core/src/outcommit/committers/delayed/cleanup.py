"""Ending a job and removing everything it leaves behind: abort, cleanup, and after commit.

Four ways, each a function: :func:`abort_job`, :func:`clean_up_job`,
:func:`clean_up_committed_job`, and :func:`delete_after_commit` (job commit ended the job
and settled its uploads itself). The order is what makes stragglers safe ("write, then
check"): the job's markers go first, so a writer whose liveness check comes later aborts
its own upload, and one whose check came earlier has saved its ``.pending`` data, which
the listings that follow the markers' deletion find (at job commit: the sweep's, and the
job directory's after ``_SUCCESS``).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime
from typing import Any, Protocol

from outcommit import capabilities as caps
from outcommit.context import JobContext
from outcommit.jobstate import JobEvidence
from outcommit.recovery import JobRecovery
from outcommit.store import FileInfo, Store

from .files import PENDING_SUFFIX, PENDINGSET_SUFFIX, Expectations, PendingCommit
from .layout import JobLayout
from .operations import CommitOperations, Logger, abortable_commits


class Ending(Protocol):
    """What :func:`teardown` uses of the committer whose job it ends
    (``DelayedCompletionCommitter``): named here, so this module needs not import it."""

    destination: str
    ops: CommitOperations
    abort_pending: bool
    recovery: JobRecovery

    def layout(self, job: JobContext) -> JobLayout: ...
    def logger(self, job: JobContext) -> Logger: ...
    def expectations(self, job: JobContext) -> Expectations: ...
    def spares_newer_uploads(self) -> bool: ...
    def job_started(self, job: JobContext) -> datetime | None: ...
    def job_evidence(self, job: JobContext) -> JobEvidence: ...
    def sweep(self, job: JobContext, *, started: datetime | None = None) -> Any: ...
    def cleanup_local(self, job: JobContext) -> None: ...


def end_job(layout: JobLayout, job: JobContext) -> None:
    """Delete the job's markers (every attempt): from now on each writer's liveness check fails."""
    for attempt in range(job.attempt + 1):
        layout.meta.delete(layout.marker(job, attempt))


def known_commits(layout: JobLayout, expect: Expectations) -> list[PendingCommit]:
    """Every upload a file of the job identifies, corrupt files included (best effort)."""
    found: list[PendingCommit] = []
    for info in layout.meta.list_files(layout.root):
        if not info.path.endswith((PENDINGSET_SUFFIX, PENDING_SUFFIX)):
            continue
        try:
            found.extend(abortable_commits(layout.meta, info.path, expect))
        except OSError:
            continue
    return found


def deletes_listed(meta: Store) -> bool:
    """Is the job directory deleted by its listed keys (S3: a directory is only a key
    prefix, and deletes go in batches)? Elsewhere it is deleted recursively."""
    return meta.batch_delete() is not None and not meta.has_capability(caps.RENAME_DIRECTORY_ATOMIC)


def delete_state(layout: JobLayout, listed: Future[list[FileInfo]] | None = None) -> None:
    """Delete the job directory.

    ``listed``: its files, listed while the job committed, given only where
    :func:`deletes_listed`. They are deleted at once, in batches of the store's size,
    while a second listing looks for anything written since (a straggler's file), which
    is then deleted too: for a job directory of up to a batch, one round trip after
    ``_SUCCESS`` where a recursive delete takes two.
    """
    meta = layout.meta
    if listed is None or listed.exception() is not None:
        meta.delete(layout.root, recursive=True)
        return
    known = [info.path for info in listed.result()]
    with ThreadPoolExecutor(1, thread_name_prefix="outcommit-state") as pool:
        again = pool.submit(meta.list_files, layout.root)
        meta.delete_files([layout.root, layout.root + "/", *known])
        seen = set(known)
        late = [info.path for info in again.result() if info.path not in seen]
    if late:
        meta.delete_files(late)


def abort_job(committer: Ending, job: JobContext) -> None:
    """Abort: end the job, abort its uploads (and the destination's orphans), delete its
    state. After a job commit began, the objects this job completed go too, proved by
    their etags, unless the commit finished: its ``_SUCCESS`` is written (the driver died
    cleaning up). Never raises: it runs on failure paths."""
    _end_and_remove(committer, job, undo=True, committed=False)


def clean_up_job(committer: Ending, job: JobContext) -> None:
    """Cleanup: as :func:`abort_job`, but never undoing a commit that began: one neither
    finished nor undone keeps the job's state (``interrupted_commit_kept``)."""
    _end_and_remove(committer, job, undo=False, committed=False)


def clean_up_committed_job(committer: Ending, job: JobContext) -> None:
    """Cleanup of a job the engine's own commit point says committed (no check whether
    its commit began)."""
    _end_and_remove(committer, job, undo=False, committed=True)


def delete_after_commit(committer: Ending, job: JobContext,
                        listed: Future[list[FileInfo]] | None) -> None:
    """After job commit wrote ``_SUCCESS``: its markers are gone (it ended the job) and
    every upload is complete or aborted, so only its state goes. ``listed``: the job
    directory's files, listed beforehand (:func:`delete_state`). Never raises."""
    log = committer.logger(job)
    _logged(log, "deleting the job directory", lambda: delete_state(committer.layout(job), listed))
    # Local staging data goes even when the store is unreachable.
    _logged(log, "deleting the job's local directory", lambda: committer.cleanup_local(job))


def _end_and_remove(committer: Ending, job: JobContext, *, undo: bool, committed: bool) -> None:
    """End the job, abort its uploads (and the destination's orphans), delete its state,
    unless that state is the evidence another abort needs (``interrupted_commit_kept``).

    Never raises: it runs on failure paths. ``undo``: an abort, which deletes what an
    interrupted commit completed; ``committed``: the job surely committed (no check).
    """
    layout, log = committer.layout(job), committer.logger(job)
    started = _start_before_ending(committer, job, log)
    _logged(log, "deleting the job markers", lambda: end_job(layout, job))
    kept: list[tuple[BaseException | None, bool]] = []  # (why, whether a commit surely began)
    _logged(log, "aborting the job's own uploads",
            lambda: _abort_own(committer, job, kept, undo=undo, committed=committed))
    if committer.abort_pending:
        _logged(log, f"aborting pending uploads under {committer.destination}",
                lambda: committer.sweep(job, started=started))
    if kept:
        why, began = kept[0]
        committer.recovery.interrupted_commit_kept(job, why, aborted=undo, began=began)
    else:
        _logged(log, "deleting the job directory", lambda: delete_state(layout))
    # Local staging data goes even when the store is unreachable.
    _logged(log, "deleting the job's local directory", lambda: committer.cleanup_local(job))


def _start_before_ending(committer: Ending, job: JobContext, log: Logger) -> datetime | None:
    """The job's start, for a sweep of scope before-job: read before the markers go
    (afterwards it cannot be told); None where no such sweep runs, or on failure."""
    if not committer.spares_newer_uploads():
        return None
    try:
        return committer.job_started(job)
    except Exception:
        log.warning("reading the job's start failed", exc_info=True)
        return None


def _abort_own(committer: Ending, job: JobContext, kept: list[tuple[BaseException | None, bool]], *,
               undo: bool, committed: bool) -> None:
    """Abort every upload a file of the job identifies; with ``undo``, also delete the
    objects an interrupted commit completed. ``kept`` gets why the state must stay."""
    began = False
    try:
        began = not committed and committer.job_evidence(job).began(range(job.attempt + 1))
        interrupted = began and not committer.recovery.kept_on_abort(job)
    except Exception as exc:  # cannot tell whether it began or finished: keep the evidence
        kept.append((exc, began))
        interrupted = False
    if interrupted and not undo:
        kept.append((None, True))  # cleanup never undoes a commit
    try:
        committer.ops.abort(known_commits(committer.layout(job), committer.expectations(job)),
                            committer.logger(job), delete_completed=interrupted and undo)
    except Exception as exc:
        if interrupted:
            kept.append((exc, True))
        raise


def _logged(log: Logger, what: str, step: Callable[[], object]) -> None:
    try:
        step()
    except Exception:
        log.warning("%s failed", what, exc_info=True)
