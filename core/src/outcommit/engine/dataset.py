"""``outcommit.write_dataset``: pyarrow's ``write_dataset`` call, committed.

``pyarrow.dataset.write_dataset``, Polars' ``write_parquet`` and pandas' ``to_parquet``
write straight to the final paths: a reader sees a half-written dataset, and a failed
write leaves its files behind. This takes what pyarrow's call takes (and any Arrow C
stream: Polars, pandas, DuckDB) and writes it as one job of the local engine, so the files
appear at job commit through the committer that is safe for the store, or not at all.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from .. import capabilities as caps
from ..errors import ConfigError, DestinationExistsError
from ..extras import require
from ..factory import resolve_config
from .inputs import batch_stream
from .local import JobResult, LocalDriver

CONFLICT_KEY = "outcommit.committer.conflict-mode"

#: pyarrow's existing_data_behavior -> outcommit's conflict mode (docs/local-engine.md).
EXISTING_DATA = {"error": "fail", "overwrite_or_ignore": "append", "delete_matching": "replace",
                 "fail": "fail", "append": "append", "replace": "replace"}

#: pyarrow's arguments that only tune its own writer: accepted, and without effect here.
IGNORED = frozenset({"use_threads", "max_open_files", "max_partitions", "create_dir",
                     "preserve_order", "min_rows_per_group"})


def write_dataset(data: Any, url: str, *, format: Any = "parquet",
                  partitioning: Any = None, partitioning_flavor: str | None = None,
                  schema: Any = None, filesystem: Any = None, basename_template: str | None = None,
                  existing_data_behavior: str | None = None, max_rows_per_file: int = 0,
                  max_rows_per_group: int = 0, compression: str | None = None,
                  committer: str | None = None, config: Mapping[str, Any] | None = None,
                  storage_options: Mapping[str, Any] | None = None, **pyarrow_options: Any) -> JobResult:
    """Write ``data`` under ``url`` as one committed job; returns its :class:`JobResult`.

    ``url``: a destination URL (``s3://bucket/events``) or a local path. ``partitioning``:
    column names, or a pyarrow Partitioning of Hive flavour: ``col=value/`` directories.
    ``existing_data_behavior``: pyarrow's names (``error``: refuse a destination holding
    data; ``overwrite_or_ignore``: add to it; ``delete_matching``: replace the partitions
    written) or outcommit's conflict modes; by default the configured conflict mode, else
    ``error``. ``config``/``storage_options``: outcommit configuration (``outcommit config``
    lists the keys). ``committer``: a committer name instead of the store's default.
    """
    require("pyarrow", "engine", "outcommit.write_dataset")
    unknown = sorted(set(pyarrow_options) - IGNORED)
    if unknown:
        raise TypeError(f"write_dataset got an unexpected keyword argument {unknown[0]!r}"
                        f"{_unsupported_hint(unknown[0])}")
    if filesystem is not None:
        raise ConfigError("write_dataset opens the store from the URL, so filesystem= is not used: "
                          "give a URL with its scheme (s3://bucket/path) and the store's settings "
                          "as config= (outcommit config lists the keys)")
    destination = _destination(url)
    settings, behaviour, source = _conflict_mode(_settings(config, storage_options),
                                                 existing_data_behavior)
    columns = partition_columns(partitioning, partitioning_flavor)
    stream = batch_stream(data, schema)
    driver = LocalDriver(destination, committer=committer, config=settings, workers=1,
                         # a one-pass stream cannot feed a second attempt (inputs.BatchStream)
                         max_attempts=2 if stream.replayable else 1,
                         fmt=file_format(format), partition_by=columns,
                         max_rows_per_file=max_rows_per_file, row_group_size=max_rows_per_group,
                         compression=compression, basename_template=basename_template)
    driver.committer.conflict_source = source
    if behaviour == "delete_matching" and columns and \
            not driver.committer.has_capability(caps.DYNAMIC_PARTITION_OVERWRITE):
        # pyarrow deletes only the partitions it writes; replacing the whole destination
        # instead would delete the partitions this write does not touch.
        raise ConfigError(f"existing_data_behavior='delete_matching' replaces only the partitions "
                          f"written, which committer '{driver.committer.name}' cannot do (it "
                          f"replaces the whole destination): use a committer with "
                          f"{caps.DYNAMIC_PARTITION_OVERWRITE} (outcommit capabilities {destination}), "
                          "or existing_data_behavior='replace' for the whole destination")
    try:
        return driver.run([stream])
    except DestinationExistsError as exc:
        raise DestinationExistsError(f"{exc} (write_dataset: existing_data_behavior="
                                     "'overwrite_or_ignore' adds to it, 'delete_matching' replaces "
                                     "the partitions written)") from exc


def _conflict_mode(settings: dict[str, Any],
                   existing_data_behavior: str | None) -> tuple[dict[str, Any], str, str]:
    """The settings with pyarrow's ``existing_data_behavior`` as outcommit's conflict mode,
    that behaviour (``""``: the configured mode stands), and where the mode came from (for
    the committer's errors)."""
    # Configured under any spelling (spark.outcommit..., fs.s3a.committer.staging.conflict-mode):
    # the raw key alone missed those, and pyarrow's 'error' then overrode the user's mode.
    configured = resolve_config(settings)
    behaviour = existing_data_behavior or ("" if configured.get_str(CONFLICT_KEY) else "error")
    source = configured.spelled(CONFLICT_KEY)
    if behaviour:
        if behaviour not in EXISTING_DATA:
            raise ConfigError(f"existing_data_behavior={behaviour!r}: use one of "
                              f"{', '.join(EXISTING_DATA)}")
        settings = {k: v for k, v in settings.items()  # this one spelling only
                    if resolve_config({k: v}).get_str(CONFLICT_KEY) is None}
        settings[CONFLICT_KEY] = EXISTING_DATA[behaviour]
        source = (f"existing_data_behavior={existing_data_behavior!r}" if existing_data_behavior
                  else "write_dataset's default, existing_data_behavior='error'")
    return settings, behaviour, source


def _unsupported_hint(name: str) -> str:
    hints = {"file_visitor": ": the files written are in the result's summary, and "
                             "outcommit.read.committed_files(url) lists every committed one",
             "file_options": ": give compression= and max_rows_per_group= instead",
             "base_dir": ": the destination is the second argument, url"}
    return hints.get(name, "")


def _destination(url: Any) -> str:
    """A URL or a local path (made a ``file://`` URL by the factory, as everywhere)."""
    if not isinstance(url, (str, os.PathLike)):
        raise TypeError(f"write_dataset needs a destination URL or path, not {type(url).__qualname__}")
    return os.fspath(url)


def _settings(config: Mapping[str, Any] | None,
              storage_options: Mapping[str, Any] | None) -> dict[str, Any]:
    """``config`` and ``storage_options`` (one mapping under two names) as one dict.

    Polars' and s3fs' own option names (``aws_endpoint_url``, ``key``) are not outcommit's:
    ignored, the write would go to another endpoint with other credentials, so refused."""
    settings = {**(config or {}), **(storage_options or {})}
    foreign = sorted(k for k in settings if "." not in str(k))
    if foreign:
        raise ConfigError(f"{foreign[0]!r} is not an outcommit configuration key: write_dataset's "
                          "config= and storage_options= take outcommit's keys and Hadoop's names "
                          "(outcommit config lists them), not Polars' or fsspec's")
    return settings


def partition_columns(partitioning: Any, flavor: str | None) -> list[str]:
    """Column names from pyarrow's ``partitioning`` (names, or a Hive Partitioning)."""
    if flavor not in (None, "hive"):
        raise ConfigError(f"partitioning_flavor={flavor!r}: outcommit writes Hive partitions "
                          "(col=value/ directories, as Spark does): use 'hive' or leave it out")
    if partitioning is None:
        return []
    if isinstance(partitioning, str):
        return [partitioning]
    if isinstance(partitioning, Sequence):
        return [str(column) for column in partitioning]
    import pyarrow.dataset as ds

    if isinstance(partitioning, ds.HivePartitioning):
        return list(partitioning.schema.names)
    raise ConfigError(f"partitioning={type(partitioning).__qualname__}: outcommit writes Hive "
                      "partitions: give the column names, or pyarrow.dataset.partitioning(schema, "
                      "flavor='hive')")


def file_format(value: Any) -> str:
    """pyarrow's ``format``: a name, or a FileFormat object of a format outcommit writes."""
    if isinstance(value, str):
        return value
    import pyarrow.dataset as ds

    for name, kind in (("parquet", ds.ParquetFileFormat), ("csv", ds.CsvFileFormat),
                       ("json", getattr(ds, "JsonFileFormat", ()))):
        if kind and isinstance(value, kind):
            return name
    raise ConfigError(f"format={type(value).__qualname__}: outcommit writes parquet, csv or json")
