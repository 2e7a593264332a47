"""Hadoop's mergePaths: how v1 and v2 move committed output into the destination, by
renames that survive a lost response (:func:`rename_recovering`).

Its own module because it is the one part of the rename committers that acts on the
destination itself: what a rename whose answer was lost did, and how a directory is merged
onto one that exists, are decided here and nowhere else.
"""

from __future__ import annotations

import logging

from .. import capabilities as caps
from ..committer import Committer
from ..retry import RetryLater, RetryPolicy
from ..store import FileInfo

log = logging.getLogger(__name__)


def rename_recovering(committer: Committer, src: FileInfo, dest: str) -> None:
    """Rename ``src`` (a file or directory) to the free path ``dest``.

    A rename whose response was lost (a reset connection, a timeout) may have happened:
    merging again would then find no source and fail a job whose output is complete.
    After a transient failure the store's evidence decides: done (carry on), not done
    (retried, with the committer's retry policy), or unknown (the real error is raised).
    """
    store = committer.store

    def attempt() -> None:
        try:
            if src.is_dir:
                store.rename_dir(src.path, dest)
            else:
                store.rename_file(src.path, dest)
            return
        except Exception as exc:
            if not store.is_transient(exc):
                raise
            failure = exc
        if src.is_dir:
            now = store.info(dest)
            # An atomic directory rename removes the source as it creates the target.
            happened = (store.info(src.path) is None and now is not None and now.is_dir
                        and store.has_capability(caps.RENAME_DIRECTORY_ATOMIC))
            outcome = "done" if happened else (
                "not-done" if now is None and store.info(src.path) is not None else "unknown")
        else:
            outcome = store.rename_outcome(src.path, dest, src)
        if outcome == "done":
            log.info("rename %s -> %s raised (%s) but had happened", src.path, dest, failure)
            return
        if outcome == "not-done":
            raise RetryLater(failure)
        raise failure

    try:
        RetryPolicy.from_config(committer.config).call(
            attempt, retry_if=lambda e: isinstance(e, RetryLater), what=f"rename of {src.path}")
    except RetryLater as exc:
        raise exc.cause from None


def _replace_with_file(committer: Committer, src: FileInfo, dest: str, target: FileInfo | None) -> None:
    """A file of the task's output onto ``dest``: whatever is there (``target``) goes first."""
    if target is not None:
        committer.store.delete(dest, recursive=True)
    rename_recovering(committer, src, dest)


def merge_paths_v1(committer: Committer, src: FileInfo, dest: str) -> None:
    """Hadoop's mergePaths, algorithm 1: rename whole directories where the target is free."""
    store = committer.store
    target = store.info(dest)
    if not src.is_dir:
        _replace_with_file(committer, src, dest, target)
    elif target is None:
        rename_recovering(committer, src, dest)
    elif not target.is_dir:
        store.delete(dest)
        rename_recovering(committer, src, dest)
    else:
        for child in store.list_dir(src.path):
            merge_paths_v1(committer, child, store.join(dest, child.name))


def merge_paths_v2(committer: Committer, src: FileInfo, dest: str) -> None:
    """Hadoop's mergePaths, algorithm 2: create directories, rename file by file.

    Directories are never renamed onto an existing one, so concurrent task commits into
    the same subdirectory cannot nest it (``sub/sub``).
    """
    store = committer.store
    target = store.info(dest)
    if not src.is_dir:
        _replace_with_file(committer, src, dest, target)
        return
    if target is not None and not target.is_dir:
        store.delete(dest)
        target = None
    if target is None:
        store.mkdirs(dest)
    for child in store.list_dir(src.path):
        merge_paths_v2(committer, child, store.join(dest, child.name))
