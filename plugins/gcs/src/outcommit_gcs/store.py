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

How a file is renamed is decided once per store, by a probe (:meth:`GcsStore.rename_support`),
never by catching errors on every rename:

- **move**: GCS's ``objects.move`` renames within a bucket in one atomic request, copying
  nothing; with ``ifGenerationMatch=0`` it refuses an existing destination. Used when
  the probe saw the server move an object *and* refuse a move onto an existing one;
- **rewrite + delete** otherwise (servers without move, as both emulators here; moves
  across buckets): the destination is created whole by one rewrite, then the source is
  deleted. ``ifGenerationMatch=0`` guards the rewrite where the probe saw the server
  enforce it; where it did not (the emulators), the store checks the destination first.

Renames are optimistic: no request before the rename itself on a server that enforces
the precondition; the evidence is gathered only when a rename fails (``rename_outcome``).

Exclusive create (``fs.create.exclusive``) is an upload with ``ifGenerationMatch=0``,
declared when ``outcommit.gcs.preconditions`` is true (GCS, fake-gcs-server): proven
against fake-gcs-server, which enforces it; gcp-storage-emulator ignores it.
"""

from __future__ import annotations

import json
import logging
import os
import posixpath
import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from glob import has_magic
from typing import Any

import fsspec

from outcommit import capabilities as caps
from outcommit.capabilities import Capabilities
from outcommit.config import Config
from outcommit.errors import ConfigError
from outcommit.store import FileInfo, RenameOutcome, Store

from .buckets import check_bucket_name, check_endpoint
from .tracing import PROBE_MARKER, trace_config

GCS_CAPABILITIES = Capabilities.of(
    caps.RENAME_FILE_ATOMIC,
    caps.LISTING_CONSISTENT,
    caps.ETAGS_AVAILABLE,
    caps.ETAGS_PRESERVED_IN_RENAME,  # the content-hash etag above, not GCS's own etag
    caps.DELETE_BATCH,  # gcsfs's rm of many names: GCS's batch API, 100 deletes a request
)

log = logging.getLogger(__name__)

ENDPOINT_KEY = "outcommit.gcs.endpoint"
PROJECT_KEY = "outcommit.gcs.project"
TOKEN_KEY = "outcommit.gcs.token"
PRECONDITIONS_KEY = "outcommit.gcs.preconditions"
MOVE_KEY = "outcommit.gcs.rename"

CONFIG_KEYS: dict[str, str] = {
    ENDPOINT_KEY: "GCS JSON API endpoint (an emulator's URL); default: Google's",
    PROJECT_KEY: "Google Cloud project",
    TOKEN_KEY: "gcsfs token: 'google_default', 'cloud', 'anon' or a service-account JSON path",
    PRECONDITIONS_KEY: "true (default): the server enforces ifGenerationMatch=0 on uploads, so "
                       "exclusive create is declared; false for servers that ignore it "
                       "(gcp-storage-emulator)",
    MOVE_KEY: "auto (default: probe the server once per store), move (objects.move) or rewrite "
              "(rewrite + delete, destination checked first)",
}


def upload_base(fs: Any) -> str:
    """The JSON API's upload URL prefix (``.../upload/storage/v1/``) of a ``GCSFileSystem``.

    From its public ``base`` (``<location>/storage/v1/``: the endpoint configured, the
    emulator's, or Google's, as gcsfs resolves it), not its private ``_location``.
    """
    base = str(fs.base)
    suffix = "/storage/v1/"
    if not base.endswith(suffix):  # a gcsfs whose base has another form: say so, never guess
        raise RuntimeError(f"gcsfs's base URL {base!r} does not end in {suffix!r}: this gcsfs is "
                           "not one outcommit-gcs supports for exclusive create")
    return base[:-len(suffix)] + "/upload" + suffix


@dataclass(frozen=True)
class RenameSupport:
    """What the probe found: how this store renames a file."""

    move: bool       # objects.move, refusing an existing destination (ifGenerationMatch=0)
    guarded: bool    # the rewrite fallback is refused on an existing destination too
    reason: str      # what the server answered, for logs and docs



def gcs_store(url: str, config: Config) -> GcsStore:
    """The store of ``url``: with exclusive create where the server enforces upload
    preconditions (``outcommit.gcs.preconditions``, true by default), else without: a
    store that neither declares nor has ``create_exclusive``."""
    exclusive = config.get_bool(PRECONDITIONS_KEY, True)
    return (ExclusiveGcsStore if exclusive else GcsStore)(url, config)


class GcsStore(Store):
    """``gs://bucket/key`` and ``gcs://bucket/key``, on a server that may ignore upload
    preconditions (gcp-storage-emulator): no exclusive create (:class:`ExclusiveGcsStore` has it)."""

    default_committer = "manifest"

    def __init__(self, url: str, config: Any = None, fs: Any = None) -> None:
        super().__init__(url, config, fs)
        # Before any request: GCS answers for 'Bad_Bucket' as for a bucket that is not there.
        bucket = self.strip(url).partition("/")[0]
        if bucket:  # none: a store of the account (an emulator's launcher creates buckets)
            check_bucket_name(bucket, url)
        endpoint = self.config.get_str(ENDPOINT_KEY)
        if endpoint:
            check_endpoint(self.config.spelled(ENDPOINT_KEY), endpoint)
        self._support: RenameSupport | None = None
        self._probe_lock = threading.Lock()

    capabilities = GCS_CAPABILITIES

    def make_filesystem(self) -> fsspec.AbstractFileSystem:
        # gcsfs's experimental HNS class probes each bucket and stalls 60 s on emulators; the
        # core class is all this store needs (objects only), whatever the environment says.
        os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")
        from gcsfs.core import GCSFileSystem

        # Its own instance (no fsspec instance cache): the request counter is this store's.
        # Every request of its aiohttp session is counted (and the probe's move asked once)
        # through aiohttp's public request tracing: outcommit_gcs.tracing.
        options: dict[str, Any] = {"use_listings_cache": False, "skip_instance_cache": True,
                                   "session_kwargs": {"trace_configs": [trace_config(self.iostatistics.add)]}}
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

    def service_endpoint(self) -> str:
        return self.config.get_str(ENDPOINT_KEY) or "https://storage.googleapis.com"

    def to_info(self, entry: Any) -> FileInfo:
        info = super().to_info(entry)
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

    def delete_many(self, paths: Sequence[str]) -> None:
        """Delete files together: gcsfs's ``rm`` of a list of names (GCS's batch API, 100
        deletes a request; concurrent single deletes on an emulator, which has no batch).

        ``rm`` reads a name holding ``*``, ``?`` or ``[`` as a pattern (fsspec's
        ``expand_path``, which leaves every other name as it is, without a request): such
        names are deleted one ``rm_file`` each instead. A bucket is never passed (``rm``
        would delete it)."""
        for path in paths:
            if "/" not in path.strip("/"):
                raise ConfigError(f"refusing to delete the bucket {path}")
        for path in (p for p in paths if has_magic(p)):
            self.delete_file(path)
        plain = [p for p in paths if not has_magic(p)]
        if plain:
            try:
                self.fs.rm(plain)
            except FileNotFoundError:  # none of them was there: nothing to do
                pass

    # -- renames -------------------------------------------------------------------------
    def rename_support(self, near: str | None = None) -> RenameSupport:
        """How this store renames: measured once (``outcommit.gcs.rename=auto``), or configured.

        The probe works on two objects of its own next to ``near`` (the first rename's
        source, in the job's temporary area) and deletes them: 4 to 7 requests, once per store.
        """
        with self._probe_lock:
            if self._support is None:
                setting = (self.config.get_str(MOVE_KEY) or "auto").strip().lower()
                if setting == "move":
                    self._support = RenameSupport(True, True, f"{MOVE_KEY}=move")
                elif setting == "rewrite":
                    self._support = RenameSupport(False, False, f"{MOVE_KEY}=rewrite")
                elif setting != "auto":
                    raise ConfigError(f"{MOVE_KEY}={setting!r}: use auto, move or rewrite")
                elif near is None:
                    return RenameSupport(False, False, "not probed yet")
                else:
                    self._support = self._probe(posixpath.dirname(near))
                    log.info("GCS rename on %s: %s", self.url(near.split("/", 1)[0]),
                             self._support.reason)
            return self._support

    def _probe(self, directory: str) -> RenameSupport:
        tag = uuid.uuid4().hex
        a, b = f"{directory}/{PROBE_MARKER}{tag}-a", f"{directory}/{PROBE_MARKER}{tag}-b"
        bucket, a_key, _ = self.fs.split_path(a)
        _, b_key, _ = self.fs.split_path(b)
        self.fs.pipe_file(a, b"a")
        self.fs.pipe_file(b, b"b")
        try:
            try:  # onto an existing object: a server with move and its precondition refuses
                self._move(bucket, a_key, b_key, {"ifGenerationMatch": "0"})
                move, answer = False, "objects.move ignores ifGenerationMatch=0 (not used)"
                self.fs.pipe_file(a, b"a")  # it moved a onto b: the rewrite probe needs a again
            except FileExistsError:
                move, answer = True, "objects.move with ifGenerationMatch=0 (one request, nothing copied)"
            except FileNotFoundError:
                move, answer = False, "objects.move not offered (404)"
            except Exception as exc:
                code = getattr(exc, "code", None) or type(exc).__name__
                move, answer = False, f"objects.move not offered ({code})"
            if move:
                return RenameSupport(True, True, answer)
            try:
                self._rewrite(bucket, a_key, bucket, b_key, {"ifGenerationMatch": "0"})
                guarded = False
            except FileExistsError:
                guarded = True
            how = ("rewrite + delete, guarded by ifGenerationMatch=0" if guarded else
                   "rewrite + delete; the server ignores ifGenerationMatch=0, so the destination "
                   "is checked first")
            return RenameSupport(False, guarded, f"{answer}: {how}")
        finally:
            for probe in (a, b):
                try:
                    self.fs.rm_file(probe)
                except FileNotFoundError:
                    pass
                except Exception:  # in the job's temporary area: goes with it at cleanup
                    log.warning("could not delete the rename probe %s", self.url(probe), exc_info=True)

    def _object_exists(self, bucket: str, key: str) -> bool:
        """One metadata request (``info`` would also list, looking for a directory)."""
        try:
            self._call("GET", "b/{}/o/{}", bucket, key, json_out=True)
        except FileNotFoundError:
            return False
        return True

    def _call(self, *args: Any, **kwargs: Any) -> Any:
        """A JSON API request through gcsfs's public ``call`` (counted by the tracing)."""
        return self.fs.call(*args, **kwargs)

    def _move(self, bucket: str, src_key: str, dst_key: str, params: dict[str, Any]) -> None:
        """``objects.move``; the probe's is asked once (``outcommit_gcs.tracing``)."""
        self._call("POST", "b/{}/o/{}/moveTo/o/{}", bucket, src_key, dst_key,
                   headers={"Content-Type": "application/json"}, json_out=True, **params)

    def _rewrite(self, src_bucket: str, src_key: str, dst_bucket: str, dst_key: str,
                 params: dict[str, Any]) -> None:
        out = self._call("POST", "b/{}/o/{}/rewriteTo/b/{}/o/{}", src_bucket, src_key,
                           dst_bucket, dst_key, headers={"Content-Type": "application/json"},
                           json_out=True, **params)
        while out.get("done") is not True:  # large objects are rewritten in several calls
            out = self._call("POST", "b/{}/o/{}/rewriteTo/b/{}/o/{}", src_bucket, src_key,
                               dst_bucket, dst_key, headers={"Content-Type": "application/json"},
                               json_out=True, rewriteToken=out["rewriteToken"], **params)

    def rename_file(self, src: str, dst: str, overwrite: bool = False) -> None:
        """One move where the server has it, else rewrite + delete; no request before it
        where the server enforces the precondition (optimistic: evidence only on failure)."""
        support = self.rename_support(near=src)
        src_bucket, src_key, _ = self.fs.split_path(src)
        dst_bucket, dst_key, _ = self.fs.split_path(dst)
        params: dict[str, Any] = {} if overwrite else {"ifGenerationMatch": "0"}
        if support.move and src_bucket == dst_bucket:
            self._move(src_bucket, src_key, dst_key, params)
            return
        if not overwrite and not support.guarded and self._object_exists(dst_bucket, dst_key):
            raise FileExistsError(f"rename destination exists: {dst}")
        self._rewrite(src_bucket, src_key, dst_bucket, dst_key, params)
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


class ExclusiveGcsStore(GcsStore):
    """A GCS store whose server enforces ``ifGenerationMatch=0`` on uploads (GCS,
    fake-gcs-server): it declares and has exclusive create."""

    capabilities = GCS_CAPABILITIES.with_(caps.CREATE_EXCLUSIVE)

    def create_exclusive(self, path: str, data: bytes) -> None:
        """One upload with ``ifGenerationMatch=0``: the server refuses an existing object (412)."""
        bucket, key, _ = self.fs.split_path(path)
        # One multipart upload, as gcsfs's simple upload (whose create mode is newer than
        # gcsfs's declared floor); fake-gcs-server enforces the precondition on this form.
        body = (b'--==0==\nContent-Type: application/json; charset=UTF-8\n\n'
                + json.dumps({"name": key}).encode()
                + b"\n--==0==\nContent-Type: application/octet-stream\n\n" + data + b"\n--==0==--")
        try:
            self._call("POST", upload_base(self.fs) + "b/{}/o", bucket,
                       uploadType="multipart", ifGenerationMatch="0", data=body,
                       headers={"Content-Type": 'multipart/related; boundary="==0=="'}, json_out=True)
        except FileExistsError:
            raise FileExistsError(f"already exists: {path}") from None
        except Exception as exc:
            if getattr(exc, "code", None) == 412:
                raise FileExistsError(f"already exists: {path}") from None
            raise
