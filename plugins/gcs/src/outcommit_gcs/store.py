"""Google Cloud Storage through gcsfs.

What GCS guarantees, and so what this store declares:

- an object appears whole or not at all, and a server-side rewrite (copy) creates the
  destination in one step: a "file rename" is rewrite + delete, and a reader sees the
  destination whole or not at all. That is the property the manifest committer needs
  from ``fs.rename.file.atomic``; the window where both objects exist is closed by rename
  recovery (below), never seen by readers of the destination;
- there are no directories: a directory rename is O(files) and not atomic, so ``v1`` is
  refused (the factory names ``manifest`` instead);
- listings are strongly consistent (gcsfs's listing cache is turned off here, so a
  second process sees a file as soon as it is written);
- GCS's own etag changes when an object is copied, so it can prove nothing about a
  copy-based rename. The etag this store reports is the object's *content hash*
  (``md5Hash``, or ``crc32c`` for composite objects), which a rewrite preserves: equal
  size and hash at the destination prove the rename's copy happened, whatever the source
  now looks like. That is the evidence ``rename_outcome`` uses.

Exclusive create is not declared: gcsfs gives no precondition on simple uploads here,
and the GCS emulator ignores preconditions, so it could not be tested.
"""

from __future__ import annotations

import os
import posixpath
from typing import Any

import fsspec

from outcommit import capabilities as caps
from outcommit.capabilities import Capabilities
from outcommit.store import FileInfo, RenameOutcome, Store

GCS_CAPABILITIES = Capabilities.of(
    caps.RENAME_FILE_ATOMIC,
    caps.LISTING_CONSISTENT,
    caps.ETAGS_AVAILABLE,
    caps.ETAGS_PRESERVED_IN_RENAME,  # the content-hash etag above, not GCS's own etag
)

ENDPOINT_KEY = "outcommit.gcs.endpoint"
PROJECT_KEY = "outcommit.gcs.project"
TOKEN_KEY = "outcommit.gcs.token"
PRECONDITIONS_KEY = "outcommit.gcs.preconditions"

CONFIG_KEYS: dict[str, str] = {
    ENDPOINT_KEY: "GCS JSON API endpoint (an emulator's URL); default: Google's",
    PROJECT_KEY: "Google Cloud project",
    TOKEN_KEY: "gcsfs token: 'google_default', 'cloud', 'anon' or a service-account JSON path",
    PRECONDITIONS_KEY: "true (default): the server enforces ifGenerationMatch=0 on rename; false "
                       "(emulators, which ignore preconditions): check the destination first",
}


class GcsStore(Store):
    """``gs://bucket/key`` and ``gcs://bucket/key``."""

    capabilities = GCS_CAPABILITIES
    default_committer = "manifest"

    def _make_filesystem(self) -> fsspec.AbstractFileSystem:
        # gcsfs's experimental HNS class probes each bucket and stalls 60 s on emulators; the
        # core class is all this store needs (objects only), whatever the environment says.
        os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")
        from gcsfs.core import GCSFileSystem

        options: dict[str, Any] = {"use_listings_cache": False}
        endpoint = self.config.get_str(ENDPOINT_KEY)
        if endpoint:
            options["endpoint_url"] = endpoint
        project = self.config.get_str(PROJECT_KEY)
        if project:
            options["project"] = project
        token = self.config.get_str(TOKEN_KEY)
        if token:
            options["token"] = token
        return GCSFileSystem(**options)

    # Paths without a client: creating gcsfs's filesystem looks for credentials (seconds
    # without a metadata server), which a committer's construction must not wait for.
    def strip(self, url: str) -> str:
        rest = url.split("://", 1)[1] if "://" in url else url
        return rest.strip("/")

    def url(self, path: str) -> str:
        return f"{self.scheme}://{path.lstrip('/')}"

    @property
    def preconditions(self) -> bool:
        return self.config.get_bool(PRECONDITIONS_KEY, True)

    def _to_info(self, entry: Any) -> FileInfo:
        info = super()._to_info(entry)
        if info.is_dir:
            return info
        digest = entry.get("md5Hash") or (f"crc32c:{entry['crc32c']}" if entry.get("crc32c") else None)
        return FileInfo(info.path, info.size, False, digest, info.extra)

    # -- writing -------------------------------------------------------------------------
    def mkdirs(self, path: str) -> None:
        """GCS has no directories: nothing to create below a bucket (and no request spent)."""

    def write_atomic(self, path: str, data: bytes) -> None:
        # One upload is atomic on GCS: no temporary object and rename needed.
        self.write_bytes(path, data)

    def write_bytes(self, path: str, data: bytes) -> None:
        self.fs.pipe_file(path, data)

    def rename_file(self, src: str, dst: str, overwrite: bool = False) -> None:
        """Server-side rewrite, then delete of the source (gcsfs ``mv`` would try moveTo first)."""
        if not overwrite and not self.preconditions and self.exists(dst):
            raise FileExistsError(f"rename destination exists: {dst}")
        src_bucket, src_key, _ = self.fs.split_path(src)
        dst_bucket, dst_key, _ = self.fs.split_path(dst)
        params: dict[str, Any] = {} if overwrite else {"ifGenerationMatch": "0"}
        out = self.fs.call("POST", "b/{}/o/{}/rewriteTo/b/{}/o/{}", src_bucket, src_key,
                           dst_bucket, dst_key, headers={"Content-Type": "application/json"},
                           json_out=True, **params)
        while out.get("done") is not True:  # large objects are rewritten in several calls
            out = self.fs.call("POST", "b/{}/o/{}/rewriteTo/b/{}/o/{}", src_bucket, src_key,
                               dst_bucket, dst_key, headers={"Content-Type": "application/json"},
                               json_out=True, rewriteToken=out["rewriteToken"], **params)
        self.fs.rm_file(src)

    def rename_dir(self, src: str, dst: str) -> None:
        """Object by object: O(files) and not atomic (why ``v1`` is refused on GCS)."""
        if self.list_files(dst):
            raise FileExistsError(f"rename destination exists: {dst}")
        for info in self.list_files(src):
            self.rename_file(info.path, posixpath.join(dst, info.path[len(src.rstrip('/')) + 1:]))

    def rename_outcome(self, src: str, dst: str, src_info: FileInfo) -> RenameOutcome:
        """Decided by content: equal size and hash at the destination mean the copy happened."""
        dst_now = self.info(dst)
        if dst_now is None or dst_now.is_dir:
            return "not-done" if self.info(src) is not None else "unknown"
        if src_info.etag and dst_now.etag == src_info.etag and dst_now.size == src_info.size:
            return "done"  # the source may linger (its delete failed): cleanup removes it
        if src_info.etag:
            # A different object is there: not this rename's copy. The source tells the rest.
            return "unknown"
        return super().rename_outcome(src, dst, src_info)
