"""Trees of store paths: the default tree of a recursive delete (one fsspec ``find`` of
exactly one path, for ``Store.tree``, the extension point a store with a better listing
overrides), and the file in the way of a directory (for ``Store.mkdirs``'s error)."""

from __future__ import annotations

import posixpath
from collections.abc import Callable

import fsspec

from .storetypes import FileInfo


def find_tree(fs: fsspec.AbstractFileSystem, path: str) -> tuple[list[str], list[str]]:
    """(the files strictly below ``path``, its directories and itself if it is one), from
    one ``find`` (one path, never a pattern)."""
    own = path.rstrip("/")
    try:
        found = fs.find(path, withdirs=True, detail=True)
    except FileNotFoundError:
        return [], []
    if not isinstance(found, dict):  # adlfs answers the find of a file with a list
        return [], []
    files: list[str] = []
    directories: list[str] = []
    for name, entry in found.items():
        name = str(entry.get("name") or name).rstrip("/")
        # Only the tree itself: gcsfs < 2024.9 answers a find of '.../dataset1' with a
        # prefix search that also returns '.../dataset10/...'.
        if name == own or name.startswith(own + "/"):
            (directories if entry.get("type") == "directory" else files).append(name)
    return [f for f in files if f != own], directories


def file_in_the_way(info: Callable[[str], FileInfo | None], path: str) -> str:
    """The first of ``path`` and its parents that is a file (``path`` when none is), by
    ``info`` (a store's): what to name when a directory cannot be created."""
    parents = [path]
    while (parent := posixpath.dirname(parents[-1])) not in ("", parents[-1]):
        parents.append(parent)
    for candidate in reversed(parents):
        status = info(candidate)
        if status is not None and not status.is_dir:
            return candidate
    return path
