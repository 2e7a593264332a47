"""Writing Arrow data into a committer's work path: Parquet, CSV or JSON lines, optionally
Hive-partitioned (``col=value/`` directories, partition columns not stored in the files).

Shared by the local engine and the PySpark data source. Any fsspec filesystem works,
including the magic committer's, because files are written through ``fs.open``.
"""

from __future__ import annotations

import io
import json
import posixpath
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from ..errors import ConfigError

FORMATS = ("parquet", "csv", "json")
HIVE_DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
_EXTENSIONS = {"parquet": "parquet", "csv": "csv", "json": "json"}


@dataclass(frozen=True)
class WrittenFile:
    path: str          # relative to the work path
    rows: int
    bytes: int


def escape_partition_value(value: Any) -> str:
    """Hive's escaping: a value can never introduce a path separator or '..'."""
    if value is None:
        return HIVE_DEFAULT_PARTITION
    text = value.isoformat() if hasattr(value, "isoformat") else str(value)
    if text == "":
        return HIVE_DEFAULT_PARTITION
    if text in (".", ".."):
        return text.replace(".", "%2E")
    return quote(text, safe=" -_.~:,;@+!$()'")


def file_name(task_index: int, job_id: str, attempt: int, fmt: str, seq: int = 0,
              unique: bool = True) -> str:
    """``part-<task>-<seq>-<jobId>-a<attempt>.<ext>``: unique per job and attempt."""
    suffix = f"-{job_id}-a{attempt}" if unique else ""
    return f"part-{task_index:05d}-{seq:03d}{suffix}.{_EXTENSIONS[fmt]}"


def _partitions(table: Any, columns: Sequence[str]) -> Iterable[tuple[str, Any]]:
    import pyarrow.compute as pc

    if not columns:
        yield "", table
        return
    missing = [c for c in columns if c not in table.column_names]
    if missing:
        raise ConfigError(f"partition columns not in the data: {', '.join(missing)}")
    keys = table.select(list(columns)).group_by(list(columns)).aggregate([]).to_pylist()
    data_columns = [c for c in table.column_names if c not in columns]
    for key in sorted(keys, key=lambda k: tuple(str(k[c]) for c in columns)):
        mask = None
        for column in columns:
            value = key[column]
            cond = pc.is_null(table[column]) if value is None else pc.equal(table[column], value)
            mask = cond if mask is None else pc.and_(mask, cond)
        part = table.filter(mask).select(data_columns)
        directory = "/".join(f"{c}={escape_partition_value(key[c])}" for c in columns)
        yield directory, part


def _encode(table: Any, fmt: str, options: dict[str, Any]) -> bytes:
    sink = io.BytesIO()
    if fmt == "parquet":
        import pyarrow.parquet as pq

        pq.write_table(table, sink, **options)
    elif fmt == "csv":
        import pyarrow.csv as pacsv

        pacsv.write_csv(table, sink)
    elif fmt == "json":
        for row in table.to_pylist():
            sink.write(json.dumps(row, default=str, ensure_ascii=False).encode("utf-8"))
            sink.write(b"\n")
    else:
        raise ConfigError(f"unknown format {fmt!r}: use one of {', '.join(FORMATS)}")
    return sink.getvalue()


def write_table(fs: Any, base: str, table: Any, *, task_index: int, job_id: str, attempt: int,
                fmt: str = "parquet", partition_by: Sequence[str] = (), unique: bool = True,
                max_rows_per_file: int = 0, options: dict[str, Any] | None = None,
                on_file: Any = None) -> list[WrittenFile]:
    """Write ``table`` under ``base`` through ``fs``; returns what was written.

    ``on_file(index, relative_path)`` is called before each file is written (the local
    engine's failure injection uses it to fail mid-write).
    """
    if fmt not in FORMATS:
        raise ConfigError(f"unknown format {fmt!r}: use one of {', '.join(FORMATS)}")
    written: list[WrittenFile] = []
    seq = 0
    for directory, part in _partitions(table, list(partition_by)):
        if part.num_rows == 0:
            continue  # an empty task writes no file, as Spark does
        step = max_rows_per_file if max_rows_per_file > 0 else part.num_rows
        for offset in range(0, part.num_rows, step):
            chunk = part.slice(offset, step)
            name = file_name(task_index, job_id, attempt, fmt, seq, unique)
            rel = posixpath.join(directory, name) if directory else name
            if on_file is not None:
                on_file(seq, rel)
            data = _encode(chunk, fmt, dict(options or {}))
            with fs.open(posixpath.join(base, rel), "wb") as f:
                f.write(data)
            written.append(WrittenFile(rel, chunk.num_rows, len(data)))
            seq += 1
    return written
