"""Reading a committed destination: exactly the committed files, nothing in flight.

A destination holds, beside the committed files, whatever running or dead jobs keep
there: ``_temporary/`` (v1, manifest), ``__magic_job-*/`` (magic), ``.pending`` and
``.pendingset`` files, ``_SUCCESS``. Spark and pyarrow skip names starting with ``_`` or
``.``; a recursive glob (``dest/**/*.parquet`` in DuckDB or Polars) does not, and reads
the in-flight files of a running job. :func:`committed_files` applies Spark's rule, and
refuses a destination no job has committed.

A streaming destination (``df.writeStream.format("outcommit")``) has no ``_SUCCESS``: its
batch log (``_outcommit_log/``) names the committed batches' files, and the files of a
batch whose commit was interrupted sit beside them, not hidden, until the query's restart
rolls them back. Both functions here read such a destination through its batch log
(``outcommit.streaming.committed_files`` / ``dataset``), whatever ``require_success`` says.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .errors import CorruptFileError, NotCommittedError
from .extras import require
from .factory import open_store
from .paths import hidden_from_readers
from .store import Store
from .streaming.reader import committed_batches, has_batch_log
from .streaming.reader import committed_files as streaming_files
from .streaming.reader import dataset as streaming_dataset
from .success import SUCCESS_FILE, SuccessData, load_success

#: Whether a reader following Spark's rule skips a path relative to the destination.
is_hidden = hidden_from_readers


def committed_files(url: str, config: Mapping[str, Any] | None = None, *,
                    require_success: bool = True) -> list[str]:
    """The URLs of the committed files under ``url``, sorted.

    Lists the destination once and drops hidden paths (:func:`is_hidden`), so no running
    or failed job's temporary file is ever returned, whichever committer wrote it.
    With ``require_success`` (the default) the destination must hold a valid ``_SUCCESS``
    (:class:`NotCommittedError` otherwise), and every file it names must be listed
    (:class:`CorruptFileError` otherwise: the output changed after its commit).

    The ``v2`` committer (and a write without a committer) puts files in place before the
    job commits: while such a job runs, its files are listed too (see docs/reading.md).

    A streaming destination (it has a batch log) is read through its log: exactly the
    committed batches' files, checked as present, sorted (module docs).
    """
    store = open_store(url, config)
    base = store.strip(url).rstrip("/")
    if has_batch_log(store, base):
        return sorted(streaming_files(url, config))
    return [name for name, _ in _job_output(store, base, url, require_success)]


def committed_files_with_sizes(url: str, config: Mapping[str, Any] | None = None, *,
                               require_success: bool = True) -> list[tuple[str, int]]:
    """:func:`committed_files` with each file's size in bytes: ``(url, size)`` pairs, from
    the same listing (a reader that splits the files into tasks by size needs both; a
    request per file would cost a round trip each). A streaming destination's sizes are
    the ones its batch log records."""
    store = open_store(url, config)
    base = store.strip(url).rstrip("/")
    if has_batch_log(store, base):
        sizes = {store.url(store.join(base, f.path)): f.size
                 for entry in committed_batches(url, config) for f in entry.files}
        return [(name, sizes.get(name, 0)) for name in sorted(streaming_files(url, config))]
    return _job_output(store, base, url, require_success)


def _job_output(store: Store, base: str, url: str, require_success: bool) -> list[tuple[str, int]]:
    """The files of a destination batch jobs committed to, with their sizes (see above)."""
    report: SuccessData | None = None
    if require_success:
        marker = f"{base}/{SUCCESS_FILE}"
        if not store.exists(marker):
            raise NotCommittedError(
                f"{store.url(marker)} does not exist: no job has committed to {url} (or its "
                f"committer wrote no report); pass require_success=False to list it anyway")
        report = load_success(store, marker)
        if not report.success:
            raise CorruptFileError(store.url(marker), "success", "is false: not a committed job's report")
    everything = store.list_files(base)
    files = sorted((store.url(info.path), info.size) for info in everything
                   if not is_hidden(info.path[len(base):]))
    if report is not None:
        # Against every file: a task may have written one readers skip (_x.csv), which
        # the report names all the same.
        listed = {store.url(info.path) for info in everything}
        missing = [name for name in report.filenames if name not in listed]
        if missing:
            raise CorruptFileError(
                store.url(f"{base}/{SUCCESS_FILE}"), "filenames",
                f"names {len(missing)} file(s) that are gone, e.g. {missing[0]}: the output "
                f"was changed after job {report.jobId} committed it")
    return files


def dataset(url: str, config: Mapping[str, Any] | None = None, *, format: str = "parquet",
            partitioning: str | None = "hive", require_success: bool = True) -> Any:
    """A ``pyarrow.dataset.Dataset`` of exactly :func:`committed_files`, with Hive-style
    partition columns (``partitioning=None`` for none) read from the directory names.
    A streaming destination: ``outcommit.streaming.dataset`` (module docs)."""
    require("pyarrow", "engine", "outcommit.read.dataset")
    import pyarrow.dataset as ds

    store = open_store(url, config)
    base = store.strip(url).rstrip("/")
    if has_batch_log(store, base):
        return streaming_dataset(url, config, format=format, partitioning=partitioning)
    paths = [store.strip(f) for f in committed_files(url, config, require_success=require_success)]
    paths = [p for p in paths if not p.endswith(("/_metadata", "/_common_metadata"))]
    return ds.dataset(paths, filesystem=store.fs, format=format,
                      partitioning=ds.partitioning(flavor=partitioning) if partitioning else None,
                      partition_base_dir=base)
