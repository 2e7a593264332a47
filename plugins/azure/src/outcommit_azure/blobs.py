"""Blobs as the store sees them: folder blobs, a listed blob as a ``FileInfo``, and which
names adlfs (the fsspec filesystem handed to writers) addresses exactly."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from outcommit.storetypes import FileInfo


def is_folder(blob: Any) -> bool:
    """A folder blob (hierarchical namespace accounts, and tools that mark directories)."""
    metadata = {k.lower(): v for k, v in (blob.metadata or {}).items()}
    return metadata.get("hdi_isfolder") == "true" or metadata.get("is_directory") == "true"


def blob_info(container: str, blob: Any) -> FileInfo:
    etag = str(blob.etag or "").strip('"') or None
    return FileInfo(path=f"{container}/{blob.name}", size=int(blob.size or 0), etag=etag,
                    extra={"last_modified": blob.last_modified, "metadata": blob.metadata})


def adlfs_addresses(path: str) -> bool:
    """Does adlfs name exactly this blob for ``path``? adlfs reads a path as the URL
    ``abfs://<path>`` (fsspec's ``infer_storage_options``, ``urllib.parse.urlsplit``): it
    puts back a non-empty ``#fragment`` after the path and then a non-empty ``?query``,
    and cuts a key at ``?versionid=``. (A test compares this with adlfs itself.)"""
    parts = urlsplit("abfs://" + path.lstrip("/"))
    rebuilt = (parts.netloc + parts.path + (f"#{parts.fragment}" if parts.fragment else "")
               + (f"?{parts.query}" if parts.query else ""))
    return rebuilt == path.strip("/") and "?versionid=" not in path
