"""Conflict modes of the multipart committers, applied at job commit before any completion.

``fail`` refuses when the scope already holds data, ``append`` adds to it, ``replace``
deletes it first. The scope is the whole destination (``directory``, ``magic``) or only
the partition directories the job writes (``partitioned``: dynamic partition overwrite).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Literal

from outcommit.errors import DestinationExistsError
from outcommit.paths import relative_to
from outcommit.store import FileInfo, Store

from .files import PendingCommit, is_hidden_path
from .operations import CommitOperations, Logger

Scope = Literal["destination", "partitions"]


def _scope_files(store: Store, dest: str, scope: Scope,
                 commits: Collection[PendingCommit]) -> tuple[list[str], list[FileInfo]]:
    """(the roots of the scope, relative to dest; the files in it)."""
    if scope == "destination":
        return [""], store.list_files(dest)
    roots = sorted({relative_to(c.path, dest).rpartition("/")[0] for c in commits})
    found: list[FileInfo] = []
    for root in roots:
        if root:
            found += store.list_files(store.join(dest, root))
        else:  # partition '' is the files at the top level, not the whole table
            found += [i for i in store.list_dir(dest) if not i.is_dir]
    return roots, found


def resolve(ops: CommitOperations, mode: str, scope: Scope, commits: Collection[PendingCommit],
            destination: str, log: Logger) -> int:
    """Apply conflict ``mode`` to the job's ``commits``; returns how many objects were deleted."""
    if mode == "append":
        return 0
    store, dest = ops.store, ops.dest
    ours = {c.path for c in commits}
    roots, candidates = _scope_files(store, dest, scope, commits)
    existing = [i.path for i in candidates
                # ours: completed by an earlier try of this very commit
                if i.path not in ours and not is_hidden_path(relative_to(i.path, dest))]
    if not existing:
        return 0
    if mode == "fail":
        where = ("partitions " + ", ".join(r or "(top level)" for r in roots)
                 if scope == "partitions" else "the destination")
        raise DestinationExistsError(
            f"{where} of {destination} already hold data ({store.url(existing[0])}, ...) "
            "and the conflict mode is 'fail': use 'append' or 'replace', or another destination")
    ops.check_completable(commits)
    store.delete_files(existing, threads=ops.threads)
    log.info("replace: deleted %d existing files", len(existing))
    return len(existing)
