"""fsspec's in-memory filesystem, with renames made atomic under one lock.

Used by tests and for pipelines that commit in-process. All memory stores of a process
share fsspec's global memory filesystem, so the lock is global too.
"""

from __future__ import annotations

import posixpath
import threading
from typing import Any

import fsspec
from fsspec.implementations.memory import MemoryFileSystem

from .. import capabilities as caps
from ..capabilities import Capabilities
from ..errors import RenameError
from ..store import FileInfo, Store

_LOCK = threading.RLock()

MEMORY_CAPABILITIES = Capabilities.of(
    caps.RENAME_FILE_ATOMIC,
    caps.RENAME_DIRECTORY_ATOMIC,
    caps.LISTING_CONSISTENT,
    caps.CREATE_EXCLUSIVE,
)


class MemoryStore(Store):
    """``memory://`` URLs."""

    capabilities = MEMORY_CAPABILITIES
    default_committer = "v1"
    file_at_open = True

    def make_filesystem(self) -> fsspec.AbstractFileSystem:
        return fsspec.filesystem("memory")

    def url(self, path: str) -> str:
        return f"memory://{path}"

    @property
    def _mem(self) -> MemoryFileSystem:
        fs = self.fs
        assert isinstance(fs, MemoryFileSystem)
        return fs

    def info(self, path: str) -> FileInfo | None:
        with _LOCK:
            return super().info(path)

    def list_dir(self, path: str) -> list[FileInfo]:
        with _LOCK:
            return super().list_dir(path)

    def list_files(self, path: str) -> list[FileInfo]:
        with _LOCK:
            return super().list_files(path)

    def mkdirs(self, path: str) -> None:
        with _LOCK:
            super().mkdirs(path)

    def write_bytes(self, path: str, data: bytes) -> None:
        with _LOCK:
            super().write_bytes(path, data)

    def delete(self, path: str, recursive: bool = False) -> None:
        """Exactly ``path`` (and, with ``recursive``, what is below it), in one step under
        the lock: fsspec's ``rm`` would read ``*``, ``?`` and ``[`` in it as a pattern."""
        mem = self._mem
        path = path.rstrip("/")
        prefix = path + "/"
        with _LOCK:
            below = [k for k in [*mem.store, *mem.pseudo_dirs] if k.startswith(prefix)]
            if below and not recursive and path not in mem.store:
                raise IsADirectoryError(f"{self.url(path)} is not empty: delete it with "
                                        "recursive=True")
            mem.store.pop(path, None)
            if path in mem.pseudo_dirs:  # an empty directory, or one emptied here
                mem.pseudo_dirs.remove(path)
            for key in below if recursive else ():
                if key in mem.store:
                    del mem.store[key]
                else:
                    mem.pseudo_dirs.remove(key)

    def delete_empty_dir(self, path: str) -> None:
        mem = self._mem
        path = path.rstrip("/")
        with _LOCK:
            if path in mem.pseudo_dirs and not self._children(path):
                mem.pseudo_dirs.remove(path)

    def rename_file(self, src: str, dst: str, overwrite: bool = False) -> None:
        mem = self._mem
        with _LOCK:
            if src not in mem.store:
                raise FileNotFoundError(src)
            if not overwrite and (dst in mem.store or dst in mem.pseudo_dirs):
                raise FileExistsError(f"rename destination exists: {dst}")
            self._ensure_parents(posixpath.dirname(dst))
            mem.store[dst] = mem.store.pop(src)
            mem.store[dst].path = dst

    def rename_dir(self, src: str, dst: str) -> None:
        mem = self._mem
        src = src.rstrip("/")
        dst = dst.rstrip("/")
        with _LOCK:
            if dst in mem.store or dst in mem.pseudo_dirs or self._children(dst):
                raise FileExistsError(f"rename destination exists: {dst}")
            if src not in mem.pseudo_dirs and not self._children(src):
                raise RenameError(f"rename source is not a directory: {src}")
            self._ensure_parents(posixpath.dirname(dst))
            prefix = src + "/"
            for key in [k for k in mem.store if k.startswith(prefix)]:
                new = dst + key[len(src):]
                mem.store[new] = mem.store.pop(key)
                mem.store[new].path = new
            moved_dirs = [d for d in mem.pseudo_dirs if d == src or d.startswith(prefix)]
            for d in moved_dirs:
                mem.pseudo_dirs.remove(d)
                mem.pseudo_dirs.append(dst + d[len(src):])
            if src not in moved_dirs:
                mem.pseudo_dirs.append(dst)

    def create_exclusive(self, path: str, data: bytes) -> None:
        with _LOCK:
            if self._mem.exists(path):
                raise FileExistsError(f"already exists: {path}")
            super().write_bytes(path, data)

    def _children(self, path: str) -> list[Any]:
        prefix = path + "/"
        return [k for k in self._mem.store if k.startswith(prefix)]

    def _ensure_parents(self, path: str) -> None:
        mem = self._mem
        while path and path != "/" and path not in mem.pseudo_dirs:
            mem.pseudo_dirs.append(path)
            path = posixpath.dirname(path)
