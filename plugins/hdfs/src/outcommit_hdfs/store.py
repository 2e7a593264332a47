"""HDFS through fsspec's ``hdfs`` filesystem (pyarrow + libhdfs).

HDFS has the guarantees the rename committers were designed for: atomic file and
directory rename, consistent listing, exclusive create. Nothing connects until the
first operation, so choosing a committer and showing capabilities need no cluster.

Renames and deletes name exactly one path: fsspec's ``hdfs`` filesystem is its
``ArrowFSWrapper``, whose ``mv`` is pyarrow's ``move`` (HDFS's atomic rename) and whose
``rm`` is pyarrow's ``delete_file``/``delete_dir`` of that path (no glob, unlike the
generic fsspec ``rm`` the base store avoids). A name HDFS cannot hold (``:``) is refused.
"""

from __future__ import annotations

import posixpath
from typing import Any
from urllib.parse import urlsplit

import fsspec

from outcommit import capabilities as caps
from outcommit.capabilities import Capabilities
from outcommit.store import Store

HDFS_CAPABILITIES = Capabilities.of(
    caps.RENAME_FILE_ATOMIC,
    caps.RENAME_DIRECTORY_ATOMIC,
    caps.LISTING_CONSISTENT,
    caps.CREATE_EXCLUSIVE,
)


class HdfsStore(Store):
    capabilities = HDFS_CAPABILITIES
    default_committer = "v1"
    file_at_open = True  # the namenode creates the file at its open

    def make_filesystem(self) -> fsspec.AbstractFileSystem:
        parts = urlsplit(self._url)
        options: dict[str, Any] = {
            "host": parts.hostname or self.config.get_str("outcommit.hdfs.host", "default"),
        }
        if parts.port:
            options["port"] = parts.port
        user = self.config.get_str("outcommit.hdfs.user")
        if user:
            options["user"] = user
        return fsspec.filesystem("hdfs", **options)

    def strip(self, url: str) -> str:
        """The path after ``scheme://authority``, literally: as Hadoop's ``Path``, which
        reads no query or fragment in it (``#`` and ``?`` are name characters)."""
        path = "/" + url.split("://", 1)[1].partition("/")[2] if "://" in url else url
        return path.rstrip("/") or "/"

    def url(self, path: str) -> str:
        parts = urlsplit(self._url)
        return f"{self.scheme}://{parts.netloc}{path}"

    def check_name(self, path: str) -> str:
        """HDFS refuses ':' in a path component (``DFSUtil.isValidName``): said before a request."""
        if ":" in path:
            raise self._unsupported(path, "HDFS refuses ':' in a path name", "rename it without ':'")
        return path

    # pyarrow's move and delete of exactly one path (module docstring).
    def rename_file(self, src: str, dst: str, overwrite: bool = False) -> None:
        self.check_name(src)
        self.check_name(dst)
        if not overwrite and self.exists(dst):
            raise FileExistsError(f"rename destination exists: {dst}")
        self.mkdirs(posixpath.dirname(dst))
        self.fs.mv(src, dst)

    def rename_dir(self, src: str, dst: str) -> None:
        self.check_name(src)
        if self.exists(self.check_name(dst)):
            raise FileExistsError(f"rename destination exists: {dst}")
        self.mkdirs(posixpath.dirname(dst))
        self.fs.mv(src, dst)

    def delete(self, path: str, recursive: bool = False) -> None:
        if not self.exists(path):
            return
        try:
            self.fs.rm(path, recursive=recursive)
        except FileNotFoundError:  # gone meanwhile (another cleanup)
            pass

    def create_exclusive(self, path: str, data: bytes) -> None:
        # HDFS create(overwrite=false) is atomic: a second creator fails.
        if self.exists(path):
            raise FileExistsError(f"already exists: {path}")
        with self.fs.open(path, "xb") as f:
            f.write(data)
