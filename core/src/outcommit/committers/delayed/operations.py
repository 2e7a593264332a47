"""Completing and aborting uploads: the only place the committers act on pending uploads.

Every call checks containment once more right before acting: whatever a pending file
says, nothing outside the job's destination is ever completed, aborted or deleted.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Collection, Iterable, Iterator

from outcommit.errors import CommitError, DestinationExistsError, UploadGoneError
from outcommit.multipart import MultipartUploads
from outcommit.parallel import outcomes
from outcommit.paths import is_inside, relative_to
from outcommit.progress import Progress
from outcommit.store import Store

from .files import Expectations, PendingCommit, salvage_commits

Logger = logging.Logger | logging.LoggerAdapter  # type: ignore[type-arg]


class CommitOperations:
    """Complete, abort and prove uploads under one destination, ``threads`` at a time."""

    def __init__(self, store: Store, mp: MultipartUploads, dest: str, threads: int) -> None:
        self.store = store
        self.mp = mp
        self.dest = dest
        self.threads = threads

    def complete_one(self, commit: PendingCommit, if_none_match: bool = False) -> str:
        """Complete one upload (idempotent: ``MultipartUploads.complete``); its etag."""
        relative_to(commit.path, self.dest)  # containment, again, right before acting
        return self.mp.complete(commit.path, commit.upload_id, commit.etags, if_none_match)

    def complete_all(self, commits: Collection[PendingCommit], progress: Progress | None = None,
                     if_none_match: bool = False, unfinished: set[tuple[str, str]] | None = None,
                     when_all_started: Callable[[], object] | None = None) -> None:
        """Complete every upload; the first failures are reported together, nothing is undone.

        ``if_none_match``: an object that exists at a target (and is not this upload's own
        earlier completion) is not replaced, atomically (DestinationExistsError).
        ``unfinished``: holds ``(path, upload_id)`` of every upload handed to the pool and
        not yet completed (a failed one stays), for work that runs beside the completions
        and must not touch them. ``when_all_started``: called once every upload has been
        handed to the pool (at most a window of them is then still running).
        """
        def complete(commit: PendingCommit) -> str:
            etag = self.complete_one(commit, if_none_match)
            if unfinished is not None:
                unfinished.discard((commit.path, commit.upload_id))
            return etag

        def started() -> Iterator[PendingCommit]:
            for commit in commits:
                if unfinished is not None:
                    unfinished.add((commit.path, commit.upload_id))
                yield commit
            if when_all_started is not None:
                when_all_started()

        failures = []
        for outcome in outcomes(complete, started(), self.threads, "outcommit-complete"):
            if outcome.error is not None:
                failures.append((outcome.item, outcome.error))
            if progress is not None:
                progress.advance()
        taken = [(c, e) for c, e in failures if isinstance(e, FileExistsError)]
        if taken:
            commit, existing = taken[0]
            raise DestinationExistsError(
                f"{len(taken)} files appeared in the destination during job commit, e.g. "
                f"{self.store.url(commit.path)}, and the conflict mode is 'fail': they were not "
                "replaced. abort_job removes what this job completed") from existing
        if failures:
            commit, error = failures[0]
            raise CommitError(f"{len(failures)} of {len(commits)} uploads could not be completed, e.g. "
                              f"{self.store.url(commit.path)}: {error}. Job commit can be retried; "
                              "abort_job removes what was completed") from error

    def abort(self, commits: Iterable[PendingCommit], log: Logger,
              delete_completed: bool = False) -> int:
        """Abort uploads (contained ones only); with ``delete_completed``, also delete the
        objects this job completed (proved by the parts' etag). Returns how many were aborted.

        A failure is logged and the others go on; with ``delete_completed`` (undoing a
        job commit) failures then raise :class:`CommitError`: a completed file may still
        be visible, and whoever called must keep the evidence of it.
        """
        def abort(commit: PendingCommit) -> bool:
            if self.mp.abort(commit.path, commit.upload_id):
                return True
            if delete_completed and self.is_completed(commit):
                self.store.delete(commit.path)
            return False

        aborted, failed = 0, []
        contained = (c for c in commits if is_inside(c.path, self.dest))
        for outcome in outcomes(abort, contained, self.threads, "outcommit-abort"):
            if outcome.error is not None:
                log.warning("could not abort upload %s to %s: %s", outcome.item.upload_id,
                            self.store.url(outcome.item.path), outcome.error)
                failed.append(outcome)
            aborted += bool(outcome.result)
        if delete_completed and failed:
            raise CommitError(f"{len(failed)} uploads could not be aborted or their completed "
                              f"files deleted, e.g. {self.store.url(failed[0].item.path)}: "
                              f"{failed[0].error}") from failed[0].error
        return aborted

    def is_completed(self, commit: PendingCommit) -> bool:
        """Does the destination object carry exactly these parts (completed by this job)?"""
        return bool(commit.etags) and self.mp.holds(commit.path, commit.upload_id, commit.etags)

    def pending_lookup(self) -> Callable[[PendingCommit], bool]:
        """Is an upload still pending under the destination? One listing per 1000 uploads."""
        listed = self.mp.list_pending(self.dest + "/")
        pending = {(p.path, p.upload_id) for p in listed}
        # Uploads without an id of the store's own (Azure block lists: the committer names
        # them) are listed by name only: a name with uncommitted blocks is still pending.
        by_name = {p.path for p in listed if not p.upload_id}
        return lambda c: (c.path, c.upload_id) in pending or c.path in by_name

    def any_pending(self, commits: Collection[PendingCommit]) -> bool:
        """Is any of ``commits`` still pending (neither completed nor aborted)?"""
        is_pending = self.pending_lookup()
        return any(is_pending(c) for c in commits)

    def check_completable(self, commits: Collection[PendingCommit],
                          is_pending: Callable[[PendingCommit], bool] | None = None) -> None:
        """Before old data is deleted: every upload is still pending (or already ours).

        An upload aborted meanwhile (another job's sweep, a lifecycle rule, a stray abort)
        would otherwise be found only at completion, after the old data is gone. One
        listing per 1000 pending uploads, not a request per file (``is_pending``: that
        listing made beforehand, :meth:`pending_lookup`).
        """
        if is_pending is None:
            is_pending = self.pending_lookup()
        for commit in commits:
            # Not listed: completed already, or still pending where the listing cannot see
            # it (block lists: a name holding a committed blob, an empty file), one request.
            if not is_pending(commit) and not self.is_completed(commit) and \
                    not self.mp.pending_unlisted(commit.path, commit.upload_id, commit.etags):
                raise UploadGoneError(
                    f"upload {commit.upload_id} to {self.store.url(commit.path)} is no longer pending "
                    "(aborted by a sweep, a lifecycle rule or 'outcommit uploads abort'): nothing was "
                    "deleted for conflict mode 'replace'; rerun the job")


def abortable_commits(store: Store, path: str, expect: Expectations) -> list[PendingCommit]:
    """The contained uploads a pending file identifies, however corrupt it is (for aborts)."""
    raw = store.read_bytes(path)
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):  # not JSON: scan the text for entries
        return salvage_commits(None, expect, raw)
    return salvage_commits(data, expect)
