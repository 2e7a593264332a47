"""Renames on Azure: a Blob account's copy then delete (and the evidence Azure records of
a copy, for rename recovery), and a hierarchical namespace's one atomic rename. The store
(:mod:`.store`) names the blobs; these functions act on its SDK clients."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote, urlsplit

from outcommit.errors import ConfigError
from outcommit.storetypes import FileInfo, RenameOutcome

_COPY_POLL_SECONDS = 0.05


def copy_then_delete(source: Any, target: Any, src: str, dst: str, overwrite: bool) -> None:
    """Copy Blob from ``source`` to ``target`` (blob clients of ``src``, ``dst``), wait for
    it to succeed, then delete the source: readers see no destination or all of it."""
    from azure.core.exceptions import ResourceExistsError, ResourceModifiedError, ResourceNotFoundError

    # If-None-Match: * on the destination: the service refuses to overwrite (409), atomically.
    conditions: dict[str, Any] = {} if overwrite else {"headers": {"If-None-Match": "*"}}
    try:
        copy = target.start_copy_from_url(source.url, **conditions)
    except ResourceNotFoundError:
        raise FileNotFoundError(f"rename source missing: {src}") from None
    except (ResourceExistsError, ResourceModifiedError):
        raise FileExistsError(f"rename destination exists: {dst}") from None
    status = copy.get("copy_status")
    while status == "pending":  # large or cross-account copies complete asynchronously
        time.sleep(_COPY_POLL_SECONDS)
        status = target.get_blob_properties().copy.status
    if status != "success":
        raise OSError(f"copy {src} -> {dst} ended with status {status}")
    source.delete_blob()


def rename_hns(service: Any, src: str, dst: str, overwrite: bool) -> None:
    """One DFS rename of ``src`` to ``dst`` (a file or a directory) through ``service``'s
    account: atomic, refusing an existing destination unless ``overwrite``."""
    try:
        from azure.storage.filedatalake import DataLakeServiceClient
    except ImportError:
        raise ConfigError("this account has a hierarchical namespace: install "
                          "outcommit-azure[hns] for its atomic rename") from None
    from azure.core import MatchConditions
    from azure.core.exceptions import ResourceExistsError, ResourceModifiedError, ResourceNotFoundError

    blob_url = service.url.rstrip("/")
    dfs = DataLakeServiceClient(blob_url.replace(".blob.", ".dfs."), credential=service.credential)
    container, _, path = src.partition("/")
    # Optimistic, as ABFS renames: no request before the rename; If-None-Match: * on the
    # destination makes the service refuse an existing one atomically (409/412).
    conditions: dict[str, Any] = {} if overwrite else {"match_condition": MatchConditions.IfMissing}
    try:
        dfs.get_file_system_client(container).get_file_client(path).rename_file(dst, **conditions)
    except ResourceNotFoundError:
        raise FileNotFoundError(f"rename source missing: {src}") from None
    except (ResourceExistsError, ResourceModifiedError):
        raise FileExistsError(f"rename destination exists: {dst}") from None


def copy_outcome(blob: Callable[[str], Any], info: Callable[[str], FileInfo | None], src: str,
                 dst: str, src_info: FileInfo) -> RenameOutcome:
    """Did a Blob account's rename (copy + delete) that raised take effect? From the
    evidence Azure records on the destination (its copy source, status and size), or both
    Content-MD5s while the source is still there; else "unknown"."""
    from azure.core.exceptions import ResourceNotFoundError

    try:
        props = blob(dst).get_blob_properties()
    except ResourceNotFoundError:
        return "not-done" if info(src) is not None else "unknown"
    copied_from = unquote(urlsplit(props.copy.source or "").path)
    container, _, name = src.partition("/")
    if (props.copy.status == "success" and copied_from.endswith(f"/{container}/{name}")
            and props.size == src_info.size):
        return "done"  # recorded by Azure on the destination: this rename's copy
    try:
        source = blob(src).get_blob_properties()
    except ResourceNotFoundError:
        return "unknown"
    md5_dst, md5_src = props.content_settings.content_md5, source.content_settings.content_md5
    if md5_dst and md5_src and bytes(md5_dst) == bytes(md5_src) and props.size == source.size:
        return "done"
    return "unknown"
