"""Ending a job and removing everything it leaves behind: abort, cleanup, and after commit.

The order is what makes stragglers safe ("write, then check"): the job's markers go
first, so a writer whose liveness check comes later aborts its own upload, and one whose
check came earlier has saved its ``.pending`` data, which the listings that follow the
markers' deletion find (at job commit: the sweep's, and the job directory's after
``_SUCCESS``).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime
from typing import Any, Protocol

from outcommit import capabilities as caps
from outcommit.committer import JobEvidence
from outcommit.context import JobContext
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

    def layout(self, job: JobContext) -> JobLayout: ...
    def logger(self, job: JobContext) -> Logger: ...
    def expectations(self, job: JobContext) -> Expectations: ...
    def spares_newer_uploads(self) -> bool: ...
    def job_started(self, job: JobContext) -> datetime | None: ...
    def job_evidence(self, job: JobContext) -> JobEvidence: ...
    def kept_on_abort(self, job: JobContext) -> bool: ...
    def sweep(self, job: JobContext, *, started: datetime | None = None) -> Any: ...
    def interrupted_commit_kept(self, job: JobContext, error: BaseException | None = None,
                                aborted: bool = False, began: bool = True) -> None: ...
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


def teardown(committer: Ending, job: JobContext, *, delete_completed: bool,
             sweep_destination: bool = True, own_aborts: bool = True, end: bool = True,
             listed: Future[list[FileInfo]] | None = None, committed: bool = False) -> None:
    """End the job, abort its uploads (and the destination's orphans), delete its state.

    Never raises: it runs on failure paths. ``delete_completed`` (abort after a job
    commit began) also deletes the objects this job completed, proved by their etags,
    unless the commit finished: its ``_SUCCESS`` is written (the driver died cleaning up).
    A commit that began and was neither finished nor undone — cleanup (not abort), or an
    abort that failed or could not tell — keeps the job's state: it is the evidence
    another abort needs (``interrupted_commit_kept``).
    ``committed``: the engine's own commit point says the job committed (no check).
    ``end=False``: the job was already ended (a committed job: one request less).
    ``listed``: the job directory's files, listed beforehand (:func:`delete_state`).
    """
    layout, log = committer.layout(job), committer.logger(job)
    kept: list[tuple[BaseException | None, bool]] = []  # (why, whether a commit surely began)
    started: datetime | None = None  # the job's start, for a sweep of scope before-job
    if sweep_destination and committer.spares_newer_uploads():
        try:  # read before the markers go: afterwards the job's start cannot be told
            started = committer.job_started(job)
        except Exception:
            log.warning("reading the job's start failed", exc_info=True)
    if end:
        _logged(log, "deleting the job markers", lambda: end_job(layout, job))
    if own_aborts:
        def abort_own() -> None:
            began = False
            try:
                began = not committed and committer.job_evidence(job).began(range(job.attempt + 1))
                interrupted = began and not committer.kept_on_abort(job)
            except Exception as exc:  # cannot tell whether it began or finished: keep the evidence
                kept.append((exc, began))
                interrupted = False
            if interrupted and not delete_completed:
                kept.append((None, True))  # cleanup never undoes a commit
            try:
                committer.ops.abort(known_commits(layout, committer.expectations(job)), log,
                                    delete_completed=interrupted and delete_completed)
            except Exception as exc:
                if interrupted:
                    kept.append((exc, True))
                raise
        _logged(log, "aborting the job's own uploads", abort_own)
    if sweep_destination and committer.abort_pending:
        _logged(log, f"aborting pending uploads under {committer.destination}",
                lambda: committer.sweep(job, started=started))
    if kept:
        why, began = kept[0]
        committer.interrupted_commit_kept(job, why, aborted=delete_completed, began=began)
    else:
        _logged(log, "deleting the job directory", lambda: delete_state(layout, listed))
    # Local staging data goes even when the store is unreachable.
    _logged(log, "deleting the job's local directory", lambda: committer.cleanup_local(job))


def _logged(log: Logger, what: str, step: Callable[[], object]) -> None:
    try:
        step()
    except Exception:
        log.warning("%s failed", what, exc_info=True)
