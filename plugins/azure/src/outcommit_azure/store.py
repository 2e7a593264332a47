"""Azure Storage through adlfs, with capabilities measured against the account type.

Two kinds of account behave differently, and the store asks the account which it is
(``get_account_information``; ``outcommit.azure.hns`` overrides without a request):

**Hierarchical namespace (ADLS Gen2, "ABFS")**: rename is a single metadata operation
on the DFS endpoint, atomic for files and directories, and keeps the etag. Rename
recovery is Hadoop's: the destination exists with the source's etag and the source is
gone, so the rename happened. Needs ``outcommit-azure[hns]`` (the DataLake SDK).

**Blob accounts (and Azurite)**: no directories; a "rename" is a server-side copy then
a delete of the source, and the copy gets a new etag. Why ``manifest`` is still safe:

- the destination blob is created by one Copy Blob; the store waits until its copy
  status is ``success`` before deleting the source, so readers of the destination see
  no blob or the whole blob — the property ``fs.rename.file.atomic`` stands for here;
- a copy that raised (or timed out) is judged by the evidence Azure records on the
  destination: its ``x-ms-copy-source`` names this rename's source, the copy status is
  ``success`` and the size matches (or, with the source still there, both Content-MD5s
  agree). Without that evidence the answer is "unknown" and the job fails.

Directory rename on Blob is O(files) and not atomic, so ``v1`` is refused there.

**Names.** Every operation of the store names exactly one blob through the SDK's clients,
never through adlfs: adlfs reads a path as a URL (a name ending in ``#`` or ``?``, or
holding ``?`` before ``#``, comes back as another; ``?versionid=`` as a version) and its
``rm`` globs. adlfs remains the fsspec filesystem handed to writers and ``open``, so a
name it cannot address is refused there, and in any path where it would move a writer
elsewhere (``?`` before ``#``, ``?versionid=``); ``\\`` is refused everywhere (Azure
reads it as ``/``). See :meth:`AzureStore.check_name`.

**Both kinds** stage blocks and commit block lists (the Blob API works on HNS accounts
too): ``fs.blocklist.delayed-completion``, the ``blocklist`` committer
(:mod:`.blocklist`, :mod:`.committer`). It is the default on Blob accounts, where it
replaces copy + delete by one Put Block List per file; HNS accounts keep ``manifest``,
whose rename is one metadata operation there.
"""

from __future__ import annotations

import posixpath
import threading
from datetime import datetime
from typing import Any
from urllib.parse import unquote, urlsplit

import fsspec

from outcommit import capabilities as caps
from outcommit.capabilities import Capabilities
from outcommit.errors import ConfigError, StoreError
from outcommit.multipart import DEFAULT_PART_SIZE
from outcommit.store import FileInfo, RenameOutcome, Store

from .account import (
    ACCOUNT_KEY_KEY,
    ACCOUNT_NAME_KEY,
    BLOCK_SIZE_KEY,
    CONFIG_KEYS,
    CONNECTION_STRING_KEY,
    HNS_KEY,
    PROBE_KEY,
    PROBE_TIMEOUT,
    SAS_TOKEN_KEY,
    SECRET_KEYS,
    credential_source,
    credentials,
    make_service,
    probe_endpoint,
)
from .blobs import adlfs_addresses as adlfs_addresses
from .blobs import blob_info, is_folder
from .blocklist import MAX_BLOCK_SIZE, AzureBlockLists
from .containers import check_container_name
from .errors import translate, translated
from .renames import copy_outcome, copy_then_delete, rename_hns

BLOB_CAPABILITIES = Capabilities.of(
    caps.RENAME_FILE_ATOMIC,  # one Copy Blob creates the destination; see the module docstring
    caps.LISTING_CONSISTENT,
    caps.ETAGS_AVAILABLE,
    caps.CREATE_EXCLUSIVE,  # Put Blob with If-None-Match: *
    caps.BLOCKLIST_DELAYED_COMPLETION,  # Put Block now, Put Block List at job commit
)
HNS_CAPABILITIES = BLOB_CAPABILITIES.with_(caps.RENAME_DIRECTORY_ATOMIC,
                                           caps.ETAGS_PRESERVED_IN_RENAME)


class AzureStore(Store):
    """``abfs://container/path``, ``abfss://container@account.dfs.core.windows.net/path``, ``az://``."""

    def __init__(self, url: str, config: Any = None, fs: Any = None) -> None:
        super().__init__(url, config, fs)
        # Before any request: Azure answers for 'Bad_Container' as for one that is not there.
        container = unquote(urlsplit(url).netloc).split("@", 1)[0]
        if container:  # none: a store of the account
            check_container_name(container, url)
        self._hns: bool | None = None
        self._service: Any = None
        self._probed = False
        self._lock = threading.Lock()

    # -- account and clients -----------------------------------------------------------
    def _credentials(self) -> dict[str, Any]:
        return credentials(self.config, self._url)

    def make_filesystem(self) -> fsspec.AbstractFileSystem:
        from adlfs import AzureBlobFileSystem

        _ = self.service  # its endpoint is probed once, before any request

        # No listing cache: a file written by another process must be listed at once.
        return AzureBlobFileSystem(**self._credentials(), use_listings_cache=False)

    @property
    def service(self) -> Any:
        """A synchronous BlobServiceClient for copy status and conditional requests."""
        with self._lock:
            if self._service is None:
                self._service = make_service(self._credentials(), self._url)
            if not self._probed:
                if self.config.get_bool(PROBE_KEY, True):
                    self._probe(str(self._service.url))
                self._probed = True
            return self._service

    _probe = staticmethod(probe_endpoint)

    # -- errors a user must act on (module :mod:`.errors`) ---------------------------------
    @property
    def endpoint(self) -> str:
        """The account's Blob endpoint, without a query (a SAS token would be in it)."""
        service = self._service
        if service is None:
            account = self._credentials().get("account_name")
            return f"https://{account}.blob.core.windows.net" if account else "(no endpoint yet)"
        parts = urlsplit(str(service.url))
        return f"{parts.scheme}://{parts.netloc}{parts.path}".rstrip("/")

    def service_endpoint(self) -> str:
        _ = self.service  # made and probed once: a wrong endpoint fails here
        return self.endpoint

    def credential_source(self) -> tuple[str, str]:
        """Where the service client's credentials come from, and how to fix them (never a secret)."""
        return credential_source(self.config)

    def translate_error(self, exc: BaseException, operation: str, path: str | None) -> StoreError | None:
        """A refusal of the credentials as a one-line store error; None for anything else."""
        netloc = urlsplit(self._url).netloc
        container = (path or "").lstrip("/").partition("/")[0] or netloc.split("@", 1)[0]
        source, fix = self.credential_source()
        return translate(exc, operation=operation, url=self.url(path) if path else self._url,
                         container=container, endpoint=self.endpoint, source=source, fix=fix)

    @property
    def hierarchical_namespace(self) -> bool:
        """Measured once per store: does the account have a hierarchical namespace?"""
        if self._hns is None:
            setting = (self.config.get_str(HNS_KEY) or "auto").strip().lower()
            if setting in ("true", "false"):
                self._hns = setting == "true"
            elif setting != "auto":
                raise ConfigError(f"{HNS_KEY}={setting!r}: use auto, true or false")
            else:
                try:
                    info = self.service.get_account_information()
                    self._hns = bool(info.get("is_hns_enabled"))
                except Exception:  # no permission to ask: assume the weaker Blob guarantees
                    self._hns = False
        return self._hns

    @property
    def capabilities(self) -> Capabilities:  # type: ignore[override]
        return HNS_CAPABILITIES if self.hierarchical_namespace else BLOB_CAPABILITIES

    @property
    def default_committer(self) -> str:  # type: ignore[override]
        """``manifest`` where rename is one metadata operation (HNS), else ``blocklist``."""
        return "manifest" if self.hierarchical_namespace else "blocklist"

    def implementation(self, capability: str) -> object:
        """The block lists are their own object (made per call: the block size is read from
        the configuration then); every other interface is this store's."""
        if capability != caps.BLOCKLIST_DELAYED_COMPLETION:
            return self
        size = self.config.get_int(BLOCK_SIZE_KEY, DEFAULT_PART_SIZE, minimum=1)
        if size > MAX_BLOCK_SIZE:
            raise ConfigError(f"{BLOCK_SIZE_KEY}={size} exceeds Azure's block size limit {MAX_BLOCK_SIZE}")
        return AzureBlockLists(self, size)

    def _blob(self, path: str) -> Any:
        """The SDK's client of exactly this blob (the name checked, never parsed)."""
        container, blob = self._split(path)
        return self.service.get_blob_client(container, blob)

    # -- names ---------------------------------------------------------------------------
    def strip(self, url: str) -> str:
        """``container/path`` of ``abfs[s]://container[@account.host]/path`` or ``az://``,
        read literally (no client: adlfs's would parse ``#`` and ``?`` as URL syntax)."""
        rest = url.split("://", 1)[1] if "://" in url else url
        container, sep, path = rest.lstrip("/").partition("/")
        return (container.split("@", 1)[0] + sep + path).rstrip("/")

    def check_name(self, path: str) -> str:
        """Refuse (UnsupportedNameError) what Azure or adlfs would read as another name:
        ``\\`` (the Blob service takes it for ``/``); and, in a path writers reach through
        adlfs (the fsspec filesystem committers hand them), ``?`` before a ``#`` or
        ``?versionid=`` (adlfs reads a path as a URL: the ``#...`` part moves before the
        ``?...`` part; ``?versionid=`` names a version)."""
        if "\\" in path:
            raise self._unsupported(path, "Azure Blob Storage reads '\\' in a blob name as '/'",
                                    "rename it without backslashes")
        if not adlfs_addresses(path + "/x"):
            raise self._unsupported(path, "adlfs (the fsspec filesystem writers use) reads a "
                                    "'?' followed by a '#', or '?versionid=', as URL syntax",
                                    "rename it without them")
        return path

    def _split(self, path: str) -> tuple[str, str]:
        """(container, blob name) of a checked store path."""
        container, _, name = self.check_name(path).strip("/").partition("/")
        return container, name

    # -- reading: the Blob API on exactly the named blob -------------------------------------
    @translated
    def info(self, path: str) -> FileInfo | None:
        from azure.core.exceptions import ResourceNotFoundError

        container, name = self._split(path)
        client = self.service.get_container_client(container)
        if not name:
            return FileInfo(path=container, is_dir=True) if client.exists() else None
        try:
            blob = client.get_blob_client(name).get_blob_properties()
        except ResourceNotFoundError:
            blob = None
        if blob is not None and not is_folder(blob):
            return blob_info(container, blob)
        try:  # a directory: a blob below it (or the folder blob of an HNS account)
            below = next(iter(client.list_blobs(name_starts_with=name.rstrip("/") + "/",
                                                results_per_page=1)), None)
        except ResourceNotFoundError:  # no such container
            return None
        return FileInfo(path=f"{container}/{name.rstrip('/')}", is_dir=True) \
            if below is not None or blob is not None else None

    @translated
    def modified(self, path: str) -> datetime | None:
        """The blob's Last-Modified (the service's clock), None when there is no blob."""
        from azure.core.exceptions import ResourceNotFoundError

        if not self._split(path)[1]:  # a container
            return None
        try:
            when = self._blob(path).get_blob_properties().last_modified
        except ResourceNotFoundError:
            return None
        return when if isinstance(when, datetime) else None

    @translated
    def list_dir(self, path: str) -> list[FileInfo]:
        from azure.core.exceptions import ResourceNotFoundError
        from azure.storage.blob import BlobPrefix

        container, name = self._split(path)
        prefix = f"{name.rstrip('/')}/" if name else ""
        found: dict[str, FileInfo] = {}
        try:
            for item in self.service.get_container_client(container).walk_blobs(
                    name_starts_with=prefix, delimiter="/", include=["metadata"]):
                child = f"{container}/{item.name.rstrip('/')}"
                if isinstance(item, BlobPrefix) or is_folder(item):
                    found[child] = FileInfo(path=child, is_dir=True)
                elif item.name != prefix:  # not the directory's own marker blob
                    found.setdefault(child, blob_info(container, item))
        except ResourceNotFoundError:
            return []
        return sorted(found.values(), key=lambda i: i.path)

    @translated
    def list_files(self, path: str) -> list[FileInfo]:
        """Every blob below ``path`` (folder blobs of HNS accounts left out): one listing."""
        from azure.core.exceptions import ResourceNotFoundError

        container, name = self._split(path)
        prefix = f"{name.rstrip('/')}/" if name else ""  # never an adjacent prefix
        try:
            blobs = [b for b in self.service.get_container_client(container).list_blobs(
                name_starts_with=prefix, include=["metadata"])
                if not is_folder(b) and not b.name.endswith("/")]
        except ResourceNotFoundError:
            return []
        return sorted((blob_info(container, b) for b in blobs), key=lambda i: i.path)

    @translated
    def read_bytes(self, path: str) -> bytes:
        from azure.core.exceptions import ResourceNotFoundError

        try:
            return self._blob(path).download_blob().readall()  # type: ignore[no-any-return]
        except ResourceNotFoundError:
            raise FileNotFoundError(self.url(path)) from None

    @translated
    def open(self, path: str, mode: str = "rb", **kwargs: Any) -> Any:
        """Through adlfs (fsspec's file objects): a name it would read as another is refused."""
        if not adlfs_addresses(path):
            raise self._unsupported(path, "adlfs (the fsspec filesystem of open) reads a name "
                                    "ending in '#' or '?' as URL syntax", "rename it")
        return super().open(path, mode, **kwargs)

    delete = translated(Store.delete)
    delete_files = translated(Store.delete_files)

    def tree(self, path: str) -> tuple[list[str], list[str]]:
        """(the blobs below ``path``, its folder blobs): one listing of the Blob API."""
        from azure.core.exceptions import ResourceNotFoundError

        container, name = self._split(path)
        prefix = f"{name.rstrip('/')}/" if name else ""
        try:
            blobs = list(self.service.get_container_client(container).list_blobs(
                name_starts_with=prefix, include=["metadata"]))
        except ResourceNotFoundError:
            return [], []
        folders = {b.name for b in blobs if is_folder(b) or b.name.endswith("/")}
        return ([f"{container}/{b.name}" for b in blobs if b.name not in folders],
                [f"{container}/{name}" for name in sorted(folders)])

    def delete_directory(self, path: str) -> None:
        """A folder blob (HNS accounts, markers of other tools), its contents deleted first."""
        self.delete_file(path)

    def delete_file(self, path: str) -> None:
        from azure.core.exceptions import ResourceNotFoundError

        try:
            self._blob(path).delete_blob()
        except ResourceNotFoundError:
            pass

    # -- writing -----------------------------------------------------------------------
    @translated
    def mkdirs(self, path: str) -> None:
        """Blob storage has no directories to create below a container (no request spent)."""
        if "/" not in path.strip("/"):
            super().mkdirs(path)

    def write_atomic(self, path: str, data: bytes) -> None:
        # One Put Blob is atomic: no temporary blob and copy needed.
        self.write_bytes(path, data)

    @translated
    def write_bytes(self, path: str, data: bytes) -> None:
        self._blob(path).upload_blob(data, overwrite=True)

    @translated
    def create_exclusive(self, path: str, data: bytes) -> None:
        from azure.core.exceptions import ResourceExistsError

        try:
            self._blob(path).upload_blob(data, overwrite=False)
        except ResourceExistsError:
            raise FileExistsError(f"already exists: {path}") from None

    @translated
    def rename_file(self, src: str, dst: str, overwrite: bool = False) -> None:
        if self.hierarchical_namespace:
            self._rename_hns(src, dst, overwrite)
            return
        copy_then_delete(self._blob(src), self._blob(dst), src, dst, overwrite)

    def _rename_hns(self, src: str, dst: str, overwrite: bool) -> None:
        rename_hns(self.service, src, dst, overwrite)

    @translated
    def rename_dir(self, src: str, dst: str) -> None:
        """Blob: blob by blob (O(files), not atomic: why ``v1`` is refused); HNS: one call."""
        if self.list_files(dst):
            raise FileExistsError(f"rename destination exists: {dst}")
        if self.hierarchical_namespace:
            self._rename_hns(src, dst, overwrite=False)
            return
        for info in self.list_files(src):
            self.rename_file(info.path, posixpath.join(dst, info.path[len(src.rstrip('/')) + 1:]))

    # -- rename recovery -------------------------------------------------------------------
    @translated
    def rename_outcome(self, src: str, dst: str, src_info: FileInfo) -> RenameOutcome:
        if self.hierarchical_namespace:
            return super().rename_outcome(src, dst, src_info)  # Hadoop's: recovery by etag
        return copy_outcome(self._blob, self.info, src, dst, src_info)


# Re-exported: plugins, tests and the emulator import these from here.
__all__ = ["ACCOUNT_KEY_KEY", "ACCOUNT_NAME_KEY", "BLOB_CAPABILITIES", "BLOCK_SIZE_KEY", "CONFIG_KEYS",
           "CONNECTION_STRING_KEY", "HNS_CAPABILITIES", "HNS_KEY", "PROBE_KEY", "PROBE_TIMEOUT",
           "SAS_TOKEN_KEY", "SECRET_KEYS", "AzureStore", "adlfs_addresses"]
