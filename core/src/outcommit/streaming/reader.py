"""Reading exactly the committed micro-batches of a destination.

A streaming destination holds, besides the committed batches' files, possibly the files
of a batch whose commit is under way or was interrupted (until the query's restart rolls
it back), and no ``_SUCCESS`` (the batch log is the report). Readers that list the
directory see those files too; readers that go through the batch log see exactly the
committed batches:

    import outcommit.streaming as oc
    oc.committed_files("s3://bucket/events", config)          # URLs, batch order
    oc.dataset("s3://bucket/events", config).to_table()       # a pyarrow dataset of them

``outcommit.read.committed_files`` / ``outcommit.read.dataset`` (the batch jobs' readers)
come here when the destination has a batch log.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..config import Config
from ..errors import CorruptFileError, NotCommittedError
from ..factory import open_store
from ..store import Store
from .log import DEFAULT_COMPACT_INTERVAL, LOG_DIR, BatchLog
from .records import BatchEntry


def has_batch_log(store: Store, dest: str) -> bool:
    """Whether ``dest`` (a store path) is a streaming destination: it has ``_outcommit_log/``."""
    try:
        return bool(store.list_dir(store.join(dest, LOG_DIR)))
    except NotADirectoryError:  # dest is a file (local disks say so): no log under it
        return False


def _log(url: str, config: Mapping[str, Any] | Config | None) -> BatchLog:
    store = open_store(url, config)
    dest = store.strip(url).rstrip("/")
    if not has_batch_log(store, dest):
        raise NotCommittedError(
            f"{store.url(store.join(dest, LOG_DIR))} does not exist: no streaming query has "
            f"written to {url}; a batch job's output is read with outcommit.read.committed_files")
    return BatchLog(store, dest, DEFAULT_COMPACT_INTERVAL)


def committed_batches(url: str, config: Mapping[str, Any] | Config | None = None, *,
                      verify: bool = False) -> list[BatchEntry]:
    """Every committed batch of the destination ``url``, in batch order (``verify``: with
    one listing, check that every logged file is there, as :func:`committed_files` does)."""
    batch_log = _log(url, config)
    entries = batch_log.entries()
    if verify:
        _verified(batch_log, [batch_log.file_path(f.path) for e in entries for f in e.files])
    return entries


def _paths(batch_log: BatchLog, through_batch: int | None, verify: bool) -> list[str]:
    paths = [batch_log.file_path(f.path) for entry in batch_log.entries()
             if through_batch is None or entry.batch_id <= through_batch for f in entry.files]
    return _verified(batch_log, paths) if verify else paths


def _verified(batch_log: BatchLog, paths: list[str]) -> list[str]:
    if paths:
        store = batch_log.store
        listed = {info.path for info in store.list_files(batch_log.dest)}
        missing = [p for p in paths if p not in listed]
        if missing:
            raise CorruptFileError(store.url(batch_log.dir), "files",
                                   f"names {len(missing)} file(s) that are gone, e.g. "
                                   f"{store.url(missing[0])}: the output was changed after its commit")
    return paths


def committed_files(url: str, config: Mapping[str, Any] | Config | None = None, *,
                    through_batch: int | None = None, verify: bool = True) -> list[str]:
    """URLs of the files of the committed batches (up to ``through_batch``), in batch order.

    :class:`NotCommittedError` if ``url`` has no batch log; an empty list if it has one but
    no batch is committed yet. With ``verify`` (the default) one listing checks that every
    logged file is there (:class:`CorruptFileError` otherwise), as ``outcommit.read`` does
    with a batch job's ``_SUCCESS``.
    """
    batch_log = _log(url, config)
    return [batch_log.store.url(p) for p in _paths(batch_log, through_batch, verify)]


def dataset(url: str, config: Mapping[str, Any] | Config | None = None, *, format: str = "parquet",
            partitioning: str | None = "hive", through_batch: int | None = None, verify: bool = True,
            **kwargs: Any) -> Any:
    """A ``pyarrow.dataset.Dataset`` of exactly the committed batches' files.

    Hive partition directories (``date=2024-05-01/``) become columns (``partitioning=None``
    for none), as with ``outcommit.read.dataset``; ``kwargs`` go to ``pyarrow.dataset.dataset``.
    """
    import pyarrow.dataset as ds

    batch_log = _log(url, config)
    return ds.dataset(_paths(batch_log, through_batch, verify), filesystem=batch_log.store.fs,
                      format=format,
                      partitioning=ds.partitioning(flavor=partitioning) if partitioning else None,
                      partition_base_dir=batch_log.dest, **kwargs)
