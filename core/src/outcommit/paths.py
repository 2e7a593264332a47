"""Path rules every committer applies to store paths: hidden names and containment."""

from __future__ import annotations

import posixpath

from .errors import ContainmentError


def is_hidden(name: str) -> bool:
    """Hadoop's rule: names starting with '_' or '.' are not data."""
    return name.startswith(("_", "."))


def relative_to(path: str, root: str) -> str:
    """``path`` relative to ``root``; raises ContainmentError if it is not inside."""
    root = root.rstrip("/")
    norm = posixpath.normpath(path)
    if norm != path.rstrip("/") or not norm.startswith(root + "/"):
        raise ContainmentError(f"{path} is not inside {root}")
    return norm[len(root) + 1:]


def is_inside(path: str, root: str) -> bool:
    try:
        relative_to(path, root)
    except ContainmentError:
        return False
    return True
