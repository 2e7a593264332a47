"""HDFS through fsspec's ``hdfs`` filesystem (pyarrow + libhdfs).

HDFS has the guarantees the rename committers were designed for: atomic file and
directory rename, consistent listing, exclusive create. Nothing connects until the
first operation, so choosing a committer and showing capabilities need no cluster.
"""

from __future__ import annotations

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

    def _make_filesystem(self) -> fsspec.AbstractFileSystem:
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
        path = urlsplit(url).path if "://" in url else url
        return path.rstrip("/") or "/"

    def url(self, path: str) -> str:
        parts = urlsplit(self._url)
        return f"{self.scheme}://{parts.netloc}{path}"

    def create_exclusive(self, path: str, data: bytes) -> None:
        # HDFS create(overwrite=false) is atomic: a second creator fails.
        if self.exists(path):
            raise FileExistsError(f"already exists: {path}")
        with self.fs.open(path, "xb") as f:
            f.write(data)
