"""Conflict modes of the multipart committers, applied at job commit before any completion.

``fail`` refuses when the scope already holds data, ``append`` adds to it, ``replace``
deletes it first. The scope is the whole destination (``directory``, ``magic``) or only
the partition directories the job writes (``partitioned``: dynamic partition overwrite).

Job commit looks at the scope (:func:`scan`: listings only, nothing changes) beside its
job check and the creation of its commit record, and acts on what it found
(:func:`resolve`) once the record exists: the listings cost no round trip of their own.
For ``replace`` over old files the scan then lists the pending uploads too, right after
the scope however long that took, so the check that every upload is still pending is
at most a round trip old when the old files are deleted.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Literal

from outcommit.errors import DestinationExistsError
from outcommit.parallel import run_all
from outcommit.paths import earlier_partition_dir, relative_to
from outcommit.store import FileInfo, Store
from outcommit.success import SUCCESS_FILE

from .files import PendingCommit, is_hidden_path
from .operations import CommitOperations, Logger

Scope = Literal["destination", "partitions"]


@dataclass(frozen=True)
class Scan:
    """What the scope held when it was listed: its roots (relative to the destination)
    and the files in it that are not this job's nor hidden; for ``replace`` over old
    files, the pending uploads listed right after (:meth:`CommitOperations.pending_lookup`)."""

    roots: list[str]
    existing: list[str]
    pending: Callable[[PendingCommit], bool] | None = None
    #: the ``_SUCCESS`` reports ``replace`` deletes first: each names files it deletes
    reports: tuple[str, ...] = ()


def _scope_files(ops: CommitOperations, scope: Scope,
                 commits: Collection[PendingCommit]) -> tuple[list[str], list[FileInfo]]:
    """(the roots of the scope, relative to dest; the files in it), the roots listed
    ``ops.threads`` at a time (a job writing 1,000 partitions: 1,000 listings)."""
    store, dest = ops.store, ops.dest
    if scope == "destination":
        return [""], store.list_files(dest)
    roots = sorted({relative_to(c.path, dest).rpartition("/")[0] for c in commits})
    # A partition written by an earlier release may have another name (its escaping of
    # 'Zürich' or '10:30'): listed too, it is replaced or refused like the new one.
    listed = sorted({*roots, *(e for r in roots if (e := earlier_partition_dir(r)) is not None)})

    def files_in(root: str) -> list[FileInfo]:
        if root:
            return store.list_files(store.join(dest, root))
        # partition '' is the files at the top level, not the whole table
        return [i for i in store.list_dir(dest) if not i.is_dir]
    return roots, [info for found in run_all(files_in, listed, ops.threads, "outcommit-scope")
                   for info in found]


def scan(ops: CommitOperations, mode: str, scope: Scope,
         commits: Collection[PendingCommit]) -> Scan | None:
    """List the scope of ``mode`` (None for ``append``, which needs nothing). Read-only:
    it may run before the job check has answered."""
    if mode == "append":
        return None
    ours = {c.path for c in commits}  # completed by an earlier try of this very commit
    roots, candidates = _scope_files(ops, scope, commits)
    existing = [i.path for i in candidates
                if i.path not in ours and not is_hidden_path(relative_to(i.path, ops.dest))]
    pending = ops.pending_lookup() if mode == "replace" and existing else None
    # The destination's report (a partition's files are in it too) and a nested dataset's
    # in the scope: left, each would name deleted files (readers fail on it).
    reports = {ops.store.join(ops.dest, SUCCESS_FILE),
               *(i.path for i in candidates if posixpath.basename(i.path) == SUCCESS_FILE)}
    return Scan(roots, existing, pending, tuple(sorted(reports)))


def resolve(ops: CommitOperations, mode: str, scope: Scope, commits: Collection[PendingCommit],
            destination: str, log: Logger, scanned: Scan | None = None) -> int:
    """Apply conflict ``mode`` to the job's ``commits``; returns how many objects were deleted.

    ``scanned``: the scope as :func:`scan` found it (listed here when not given).
    """
    found = scanned if scanned is not None else scan(ops, mode, scope, commits)
    if found is None or not found.existing:
        return 0
    existing = found.existing
    if mode == "fail":
        where = ("partitions " + ", ".join(r or "(top level)" for r in found.roots)
                 if scope == "partitions" else "the destination")
        raise DestinationExistsError(
            f"{where} of {destination} already hold data ({ops.store.url(existing[0])}, ...) "
            "and the conflict mode is 'fail': use 'append' or 'replace', or another destination")
    ops.check_completable(commits, found.pending)
    _delete_reports_first(ops.store, found.reports, existing, ops.threads)
    log.info("replace: deleted %d existing files", len(existing))
    return len(existing)


def _delete_reports_first(store: Store, reports: Sequence[str], files: Sequence[str],
                          threads: int) -> None:
    """Delete the ``_SUCCESS`` reports, then the files they name: no report may stay that
    names deleted files (readers fail on it). A store deleting in batches (S3) takes the
    reports in its first batch, no round trip more: its batches go one after another and a
    failed one stops the rest. Elsewhere each file is a request of its own, run side by
    side: the files go only once every report is gone (a failed report delete, with the
    files deleted beside it, left the report naming them: memmp://, Azure)."""
    if store.batch_delete() is not None:
        store.delete_files([*reports, *files], threads=threads)
        return
    store.delete_files(list(reports), threads=threads)
    store.delete_files(files, threads=threads)
