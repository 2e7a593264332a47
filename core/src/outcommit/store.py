"""The store interface: the only operations committers use, over an fsspec filesystem.

Paths given to a store are *store paths*: the URL with its scheme removed, as fsspec
strips it (``bucket/key`` for object stores, ``/abs/path`` locally). ``url()`` puts the
scheme back. A store declares its capabilities as data; ``has_capability`` answers
``False`` for anything not declared.

Every operation acts on exactly the path it is given, as Hadoop's ``FileSystem`` does
(it never globs): ``out/p*.csv`` is one file, never a pattern that also reaches
``out/pa.csv``; ``a%2Fb`` is one name, never ``a/b``. fsspec's calls on several paths
(``rm``, ``mv``, ``copy``, ``expand_path``, ``glob``) read ``*``, ``?`` and ``[...]`` as
patterns, so no store operation uses them: everything here is made of fsspec's calls on
one path (``info``, ``ls``, ``find``, ``open``, ``cat_file``, ``pipe_file``, ``rm_file``,
``cp_file``, ``makedirs``). A name a store cannot hold exactly (its service or client
would read it as another) is refused before any request (:meth:`Store.check_name`).
"""

from __future__ import annotations

import logging
import posixpath
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import IO, Any

import fsspec

from . import capabilities as caps
from .capabilities import Capabilities
from .config import Config
from .errors import RenameError, UnsupportedNameError
from .iostats import IOStatistics
from .parallel import run_all
from .storeio import connect_once as connect_once
from .storeio import fs_path as fs_path
from .storeio import throttling
from .storejson import decode_json, encode_json
from .storeoptional import RENAMED_EXTENSION_POINTS as RENAMED_EXTENSION_POINTS
from .storeoptional import OptionalOperations, refuse_overrides
from .storerecovery import decide_rename_outcome
from .storetree import file_in_the_way, find_tree
from .storetypes import BatchDelete, ExclusiveCreate, FileInfo, ObjectMetadata, RenameOutcome

log = logging.getLogger(__name__)


_KEEPING_FILESYSTEM = threading.Lock()  # held for an assignment, never across a request


class Store(OptionalOperations):
    """A destination filesystem plus its declared capabilities.

    Subclasses set ``capabilities`` and override operations where the store can do
    better than generic fsspec calls (atomic rename, etags...). Optional operations
    (exclusive create, multipart uploads...) are offered by declaring their capability and
    reached through the accessors of :class:`~outcommit.storeoptional.OptionalOperations`.
    """

    #: Capabilities of every store of this class; an instance may refine them.
    capabilities: Capabilities = Capabilities()
    #: Committer used when the caller names none (a store may decide per instance, from
    #: what it measured: Azure's differs between Blob and HNS accounts).
    default_committer: str = "v1"
    #: Requests the store's clients serve at once (a connection pool's size): the default
    #: of ``outcommit.committer.threads``.
    parallelism: int = 8
    #: A file opened for writing exists (under its name, empty) from its open, not from its
    #: close: local disks, HDFS, fsspec's memory filesystem. Object stores: False.
    file_at_open: bool = False

    def __init__(self, url: str, config: Config | None = None,
                 fs: fsspec.AbstractFileSystem | None = None) -> None:
        self.config = config or Config()
        #: Requests this store made, under Hadoop's names where the store counts them.
        self.iostatistics = IOStatistics()
        self.scheme = url.split("://", 1)[0] if "://" in url else "file"
        self._fs = fs
        self._url = url

    # -- identity ----------------------------------------------------------------
    @property
    def fs(self) -> fsspec.AbstractFileSystem:
        """The fsspec filesystem, created on first use (no connection before).

        Task attempts on several threads share a store (``outcommit.factory.shared_store``):
        threads that first use it together may each make one, but the first one kept is
        the one every thread uses (one client, one connection pool). Made unlocked: a slow
        one (credentials lookup, a cluster's connection) holds up no other store.
        """
        fs = self._fs
        if fs is None:
            made = self.make_filesystem()
            with _KEEPING_FILESYSTEM:
                if self._fs is None:
                    self._fs = made
                fs = self._fs
        return fs

    # -- extension points: what a store plugin overrides (docs/plugins.md) ------------
    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        refuse_overrides(cls)

    def make_filesystem(self) -> fsspec.AbstractFileSystem:
        """Extension point: the fsspec filesystem of this store, made on first use (import
        SDKs here, never at module import). Default: fsspec's for the scheme."""
        return fsspec.filesystem(self.scheme)

    def has_capability(self, name: str) -> bool:
        return self.capabilities.has_capability(name)

    def delete_files(self, paths: Sequence[str], threads: int | None = None) -> None:
        """Delete files (not directories): in batches where the store can, else one request
        per file, ``threads`` (default: ``parallelism``) at once (a ``replace`` of 10,000
        files is 10,000 requests: one after another they would take minutes)."""
        batch = self.batch_delete()
        if batch is not None:
            batch.delete_many(paths)
            return
        run_all(self.delete, paths, min(threads or self.parallelism, len(paths)), name="outcommit-delete")

    def strip(self, url: str) -> str:
        """Store path of a URL of this store."""
        return str(fs_path(self.fs, url)).rstrip("/") or "/"

    def url(self, path: str) -> str:
        """URL of a store path."""
        return f"{self.scheme}://{path.lstrip('/')}" if self.scheme not in ("file", "memory") \
            else f"{self.scheme}://{path}"

    @staticmethod
    def join(base: str, *parts: str) -> str:
        return posixpath.join(base, *parts) if base else posixpath.join(*parts)

    def check_name(self, path: str) -> str:
        """``path``, when this store can act on exactly that name; else
        :class:`~outcommit.errors.UnsupportedNameError` naming the character and the fix.

        Every operation on a path asks first, so a name the store's service or client
        would read as another (Azure reads ``\\`` as ``/``) is refused before a request,
        and nothing is written, read or deleted in its place. Every name is held here;
        stores refuse what theirs cannot hold (docs/capabilities.md lists them).
        """
        return path

    def _unsupported(self, path: str, what: str, fix: str) -> UnsupportedNameError:
        return UnsupportedNameError(f"{self.url(path)}: {what}; {fix}")

    # -- reading -----------------------------------------------------------------
    def to_info(self, entry: Mapping[str, Any]) -> FileInfo:
        """Extension point: one fsspec listing or ``info`` entry as a :class:`FileInfo`
        (a store whose etag lives under another key maps it here)."""
        is_dir = entry.get("type") == "directory"
        etag = entry.get("ETag") or entry.get("etag") or entry.get("md5Hash")
        if isinstance(etag, str):
            etag = etag.strip('"')
        return FileInfo(path=str(entry["name"]).rstrip("/"), size=int(entry.get("size") or 0),
                        is_dir=is_dir, etag=etag if not is_dir else None, extra=dict(entry))

    def info(self, path: str) -> FileInfo | None:
        """Status of ``path``, or None when nothing is there."""
        self.check_name(path)
        try:
            return self.to_info(self.fs.info(path))
        except (FileNotFoundError, NotADirectoryError):  # a path under a file: nothing there
            return None

    def exists(self, path: str) -> bool:
        return self.info(path) is not None

    def modified(self, path: str) -> datetime | None:
        """When the file at ``path`` was written, by the store's own clock (timezone-aware);
        None when nothing is there or the store cannot say.

        For comparing with other times the same store gives (a pending upload's
        initiation), never with this machine's clock. fsspec's ``modified`` by default.
        """
        self.check_name(path)
        try:
            when = self.fs.modified(path)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError, NotImplementedError):
            return None
        if not isinstance(when, datetime):
            return None
        return when if when.tzinfo is not None else when.replace(tzinfo=timezone.utc)

    def is_dir(self, path: str) -> bool:
        status = self.info(path)
        return status is not None and status.is_dir

    def list_dir(self, path: str) -> list[FileInfo]:
        """Direct children of a directory; empty when it does not exist."""
        self.check_name(path)
        try:
            entries = self.fs.ls(path, detail=True)
        except FileNotFoundError:
            return []
        own = path.rstrip("/")
        # Only the directory's own children: adlfs answers the listing of a directory that
        # does not exist with what its name is a prefix of (dataset1 -> dataset1.bak/...).
        return sorted((self.to_info(e) for e in entries
                       if str(e["name"]).rstrip("/").rpartition("/")[0] == own),
                      key=lambda i: i.path)

    def list_files(self, path: str) -> list[FileInfo]:
        """Every file below ``path``, recursively, in one listing where the store allows."""
        self.check_name(path)
        try:
            found = self.fs.find(path, detail=True, withdirs=False)
        except FileNotFoundError:
            return []
        # Only what is below ``path``: some fsspec releases (gcsfs < 2024.9) answer a find of
        # ``.../dataset1`` with a prefix search that also returns ``.../dataset10/...``.
        own = path.rstrip("/")
        below = own + "/"
        return sorted((self.to_info(e) for e in found.values() if e.get("type") != "directory"
                       and (str(e["name"]).startswith(below) or str(e["name"]) == own)),
                      key=lambda i: i.path)

    def open(self, path: str, mode: str = "rb", **kwargs: Any) -> IO[bytes]:
        self.check_name(path)
        if "w" in mode:
            self.mkdirs(posixpath.dirname(path))
        return self.fs.open(path, mode, **kwargs)  # type: ignore[no-any-return]

    def read_bytes(self, path: str) -> bytes:
        self.check_name(path)
        return self.fs.cat_file(path)  # type: ignore[no-any-return]

    # -- writing -----------------------------------------------------------------
    def mkdirs(self, path: str) -> None:
        if not path:
            return
        try:
            self.fs.makedirs(path, exist_ok=True)
        except (NotADirectoryError, FileExistsError) as exc:
            # A file where a directory must be (a destination naming a file, or a file
            # among its parents): say which, not the OS's "Not a directory: .../_temporary".
            raise NotADirectoryError(f"cannot create the directory {self.url(path)}: "
                                     f"{self.url(file_in_the_way(self.info, path))} is a file, "
                                     "not a directory") from exc

    def write_bytes(self, path: str, data: bytes) -> None:
        self.check_name(path)
        self.mkdirs(posixpath.dirname(path))
        self.fs.pipe_file(path, data)

    def write_atomic(self, path: str, data: bytes) -> None:
        """Write so that a reader sees the old content or the new, never a part."""
        if self.has_capability(caps.RENAME_FILE_ATOMIC):
            tmp = f"{path}.tmp-{uuid.uuid4().hex}"
            self.write_bytes(tmp, data)
            try:
                self.rename_file(tmp, path, overwrite=True)
            except BaseException:
                self.delete(tmp)
                raise
        else:
            # Object stores: a single PUT is atomic.
            self.write_bytes(path, data)

    def rename_file(self, src: str, dst: str, overwrite: bool = False) -> None:
        """Rename one file. Returns only when it happened; raises otherwise.

        Here: a copy, then a delete of the source (neither atomic nor O(1)). A store that
        declares ``fs.rename.file.atomic`` overrides it with its own rename: fsspec's
        ``mv`` is no such thing (it globs its paths: ``mv('p*.csv', ...)`` moves
        ``pa.csv`` too, and then deletes by the same pattern).
        """
        self.check_name(src)
        self.check_name(dst)
        if not overwrite and self.exists(dst):
            raise FileExistsError(f"rename destination exists: {dst}")
        self.mkdirs(posixpath.dirname(dst))
        self.fs.cp_file(src, dst)
        self.delete_file(src)

    def rename_dir(self, src: str, dst: str) -> None:
        """Rename a directory to a path that does not exist: file by file here (see
        :meth:`rename_file`); stores with an atomic directory rename override it."""
        self.check_name(src)
        self.check_name(dst)
        if self.exists(dst):
            raise FileExistsError(f"rename destination exists: {dst}")
        root = src.rstrip("/")
        for info in self.list_files(src):
            self.rename_file(info.path, dst.rstrip("/") + info.path[len(root):])

    def delete(self, path: str, recursive: bool = False) -> None:
        """Delete the file ``path`` (with ``recursive``: the tree below it too); a missing
        path is not an error. Exactly ``path``: never what a pattern in its name matches.

        Here: the tree from one listing (:meth:`tree`), its files deleted one ``rm_file``
        each (in batches where the store declares ``fs.delete.batch``), then its
        directories deepest first, each only once empty (:meth:`delete_empty_dir`: nothing
        to do on an object store), then ``path`` itself if it is a file.
        """
        self.check_name(path)
        if recursive:
            files, directories = self.tree(path)
            if files:
                self.delete_files(files)
            for directory in sorted(directories, key=lambda d: d.count("/"), reverse=True):
                self.delete_directory(directory)
        self.delete_file(path)

    def tree(self, path: str) -> tuple[list[str], list[str]]:
        """Extension point of ``delete(recursive=True)``: (the files strictly below
        ``path``, its directories and itself if it is one). Default: one fsspec ``find``
        (one path, no pattern)."""
        return find_tree(self.fs, path)

    def delete_directory(self, path: str) -> None:
        """Extension point of ``delete(recursive=True)``: a directory of a tree being
        deleted, its files gone: only if empty (another job may be creating something
        inside), as :meth:`delete_empty_dir` does."""
        self.delete_empty_dir(path)

    def delete_file(self, path: str) -> None:
        """Extension point of ``delete``: one file, exactly the named path, missing is fine.
        Default: one ``rm_file``, fsspec's only delete that takes its path as a name."""
        try:
            self.fs.rm_file(path)
        except FileNotFoundError:
            pass

    def delete_empty_dir(self, path: str) -> None:
        """Remove a directory only if it is empty, never its contents.

        Used for directories shared by jobs (``<dest>/_temporary``): another job may be
        creating its own directory inside at this very moment. On object stores an empty
        directory does not exist, so there is nothing to remove.
        """

    # -- JSON --------------------------------------------------------------------
    def save_json(self, path: str, data: Any) -> None:
        self.write_atomic(path, encode_json(data))

    def load_json(self, path: str, max_bytes: int = 256 * 1024 * 1024) -> Any:
        """Parse a JSON file; a corrupt one raises CorruptFileError naming the file."""
        return decode_json(self.read_bytes(path), self.url(path), max_bytes)

    # -- rename recovery (manifest committer) ------------------------------------------
    def rename_outcome(self, src: str, dst: str, src_info: FileInfo) -> RenameOutcome:
        """Did a rename that raised (or timed out) take effect? Decided from evidence only.

        ``src_info`` is what the caller knew of the source before renaming. The caller
        guarantees that the destination did not exist before its rename and that nothing
        else touches the source. Answers ``"done"`` (the destination holds the source's
        content; the source may still be there), ``"not-done"`` (nothing happened: the
        rename may be retried) or ``"unknown"`` (the caller must fail rather than guess).
        The default is conservative; stores with better evidence override it.
        """
        return decide_rename_outcome(self, src, dst, src_info)

    def is_throttling(self, exc: BaseException) -> bool:
        """Is ``exc`` the store refusing a request under load (HTTP 503/429)?"""
        return throttling(exc)

    def is_transient(self, exc: BaseException) -> bool:
        """Is ``exc`` a failure that a retry of the same request may not meet again?"""
        return self.is_throttling(exc) or isinstance(exc, (TimeoutError, ConnectionError))

    def service_endpoint(self) -> str | None:
        """The URL of the service this store sends its requests to (``outcommit check``
        reaches it before anything else); None for a store with no network service (local
        files, memory). May raise :class:`~outcommit.errors.StoreUnreachableError` where
        finding it connects (a client that probes its endpoint)."""
        return None

    def close(self) -> None:
        """Release clients; the default has nothing to release."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self._url}>"


@dataclass(frozen=True)
class StoreSpec:
    """How a plugin registers a store for one or more URL schemes."""

    schemes: tuple[str, ...]
    factory: Callable[[str, Config], Store]
    default_committer: str
    #: The capabilities every store of this spec declares (shown without connecting).
    capabilities: Capabilities
    description: str = ""
    plugin: str = ""


__all__ = ["BatchDelete", "ExclusiveCreate", "FileInfo", "ObjectMetadata", "RenameError", "RenameOutcome",
           "Store", "StoreSpec"]

