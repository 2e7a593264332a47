"""Rename recovery (manifest committer): did a rename that raised take effect? The
conservative default of ``Store.rename_outcome``, decided from evidence only."""

from __future__ import annotations

from typing import Protocol

from . import capabilities as caps
from .storetypes import FileInfo, RenameOutcome


class Evidence(Protocol):
    """What the decision reads of a store (``Store``, named here so this module needs not
    import the store module that uses it)."""

    def info(self, path: str) -> FileInfo | None: ...
    def has_capability(self, name: str) -> bool: ...


def decide_rename_outcome(store: Evidence, src: str, dst: str, src_info: FileInfo) -> RenameOutcome:
    """``"done"``, ``"not-done"`` or ``"unknown"`` for a rename of ``src`` (as ``src_info``
    described it before) to ``dst``, which did not exist before: see ``Store.rename_outcome``."""
    src_now, dst_now = store.info(src), store.info(dst)
    if dst_now is None or dst_now.is_dir:
        return "not-done" if src_now is not None and dst_now is None else "unknown"
    if src_now is not None:
        # Both exist: a half-done copy+delete, or an unrelated destination. No way to tell.
        return "unknown"
    if (src_info.etag and dst_now.etag == src_info.etag
            and store.has_capability(caps.ETAGS_PRESERVED_IN_RENAME)):
        return "done"
    if (store.has_capability(caps.RENAME_FILE_ATOMIC) and not src_info.etag
            and dst_now.size == src_info.size):
        # One atomic step removes the source as it creates the destination, and no etag
        # could prove otherwise: the source is gone only because this rename happened.
        return "done"
    return "unknown"
