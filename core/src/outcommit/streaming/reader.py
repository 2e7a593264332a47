"""Reading exactly the committed micro-batches of a destination.

A streaming destination holds, besides the committed batches' files, possibly the files
of a batch whose commit is under way or was interrupted (until the query's restart rolls
it back). Readers that list the directory see those too; readers that go through the
batch log see exactly the committed batches:

    import outcommit.streaming as oc
    oc.committed_files("s3://bucket/events", config)          # URLs, batch order
    oc.dataset("s3://bucket/events", config).to_table()       # a pyarrow dataset of them
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..config import Config
from ..factory import open_store
from .log import DEFAULT_COMPACT_INTERVAL, BatchEntry, BatchLog


def _log(url: str, config: Mapping[str, Any] | Config | None) -> BatchLog:
    store = open_store(url, config)
    return BatchLog(store, store.strip(url), DEFAULT_COMPACT_INTERVAL)


def committed_batches(url: str, config: Mapping[str, Any] | Config | None = None) -> list[BatchEntry]:
    """Every committed batch of the destination ``url``, in batch order."""
    return _log(url, config).entries()


def committed_files(url: str, config: Mapping[str, Any] | Config | None = None, *,
                    through_batch: int | None = None) -> list[str]:
    """URLs of the files of the committed batches (up to ``through_batch``), in batch order."""
    batch_log = _log(url, config)
    store = batch_log.store
    return [store.url(batch_log.file_path(f.path)) for entry in batch_log.entries()
            if through_batch is None or entry.batch_id <= through_batch for f in entry.files]


def dataset(url: str, config: Mapping[str, Any] | Config | None = None, *, format: str = "parquet",
            partitioning: Any = "hive", through_batch: int | None = None, **kwargs: Any) -> Any:
    """A ``pyarrow.dataset.Dataset`` of exactly the committed batches' files.

    Hive partition directories (``date=2024-05-01/``) become columns, as in the directory.
    """
    import pyarrow.dataset as ds

    batch_log = _log(url, config)
    store = batch_log.store
    paths = [batch_log.file_path(f.path) for entry in batch_log.entries()
             if through_batch is None or entry.batch_id <= through_batch for f in entry.files]
    return ds.dataset(paths, filesystem=store.fs, format=format, partitioning=partitioning,
                      partition_base_dir=batch_log.dest, **kwargs)
