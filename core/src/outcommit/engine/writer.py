"""Writing Arrow data into a committer's work path as it arrives: Parquet, CSV or JSON lines,
optionally Hive-partitioned (``col=value/`` directories, partition columns not stored in
the files).

A task never holds its partition: :class:`StreamingWriter` takes record batches one at a
time, splits each by partition value, and appends the rows to one open file per
partition directory, which rolls over to a new file after ``max_rows_per_file`` rows or
about ``max_bytes_per_file`` bytes, within a batch if need be (the batch is sliced). The
byte budget counts the bytes the file has written plus an estimate of the rows it is about
to take: their Arrow size times the ratio of encoded to Arrow bytes the file (or the
previous file) has shown; the first guess of a task is checked by encoding the buffered
rows. A Parquet row group holds at most ``row_group_size`` rows and about ROW_GROUP_BYTES
(Arrow) of them. A task's memory is its open files' buffers (a Parquet row group being
filled, the store stream's buffer), whatever the size of its partition.

Shared by the local engine and the PySpark data source. Any fsspec filesystem works,
including the magic committer's, because files are written through ``fs.open``. One file
in one format (row groups, the encoded/Arrow ratio): ``formats.py``; the rows of each
partition directory: ``partitioning.py``.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError

# Where tests have imported it from.
from ..paths import escape_partition_value as escape_partition_value
from .formats import FORMATS, OpenFile, WrittenFile
from .partitioning import split_by_partition

_EXTENSIONS = {"parquet": "parquet", "csv": "csv", "json": "json"}


def file_name(task_index: int, job_id: str, attempt: int, fmt: str, seq: int = 0,
              unique: bool = True) -> str:
    """``part-<task>-<seq>-<jobId>-a<attempt>.<ext>``: unique per job and attempt."""
    suffix = f"-{job_id}-a{attempt}" if unique else ""
    return f"part-{task_index:05d}-{seq:03d}{suffix}.{_EXTENSIONS[fmt]}"


def check_basename_template(template: str | None) -> None:
    """pyarrow's ``basename_template``: one file name with ``{i}`` (the file's number in the
    task), never a path: a ``/`` or ``..`` would write outside the work path, and a name
    starting with ``_`` or ``.`` would be hidden from every reader (docs/reading.md)."""
    if template is None:
        return
    if "{i}" not in template:
        raise ConfigError(f"basename_template {template!r} has no {{i}}: the files of one write "
                          "need distinct names, e.g. 'part-{i}.parquet'")
    if "/" in template or "\\" in template or template in (".", "..") or template[0] in "._":
        raise ConfigError(f"basename_template {template!r} must be a plain file name not starting "
                          "with '_' or '.' (readers skip those): directories come from partitioning")


@dataclass
class StreamingWriter:
    """Write record batches under ``base`` through ``fs``, one open file per partition.

    ``on_file(seq, relative_path)`` is called before each file is opened (the engines'
    failure injection fails an attempt mid-write there).

    ``schema`` (Arrow), or the schema of an empty batch written, lets task 0 of an
    unpartitioned Parquet write that received no rows write one file with no rows, as
    Spark's FileFormatWriter does: a job whose every task is empty then leaves a dataset
    that readers can read (no rows, its columns) instead of nothing but ``_SUCCESS``.
    """

    fs: Any
    base: str
    task_index: int
    job_id: str
    attempt: int
    fmt: str = "parquet"
    partition_by: Sequence[str] = ()
    unique: bool = True
    max_rows_per_file: int = 0
    max_bytes_per_file: int = 0
    options: dict[str, Any] = field(default_factory=dict)
    on_file: Callable[[int, str], None] | None = None
    schema: Any = None
    #: pyarrow's basename_template ("part-{i}.parquet", ``{i}`` the file's number in the
    #: task) instead of the job- and attempt-unique names of file_name.
    basename_template: str | None = None
    written: list[WrittenFile] = field(default_factory=list)
    _open: dict[str, OpenFile] = field(default_factory=dict)
    _seq: int = 0
    _ratio: float | None = None   # encoded bytes per Arrow byte of the last file closed
    _named: dict[str, Any] = field(default_factory=dict)  # directory -> partition values

    def __post_init__(self) -> None:
        if self.fmt not in FORMATS:
            raise ConfigError(f"unknown format {self.fmt!r}: use one of {', '.join(FORMATS)}")

    def write_batch(self, batch: Any) -> None:
        if batch.num_rows == 0:
            if self.schema is None and batch.num_columns:
                self.schema = batch.schema
            return  # no file for no rows (but see close(): task 0's schema-only file)
        for directory, part in split_by_partition(batch, list(self.partition_by), self._named):
            # Arrow bytes per row of this part: what the byte budget is estimated with.
            per_row = part.nbytes / part.num_rows
            offset = 0
            while offset < part.num_rows:
                current = self._file(directory, part.schema)
                room = part.num_rows - offset
                if self.max_rows_per_file > 0:
                    room = min(room, self.max_rows_per_file - current.rows)
                cut = False
                if self.max_bytes_per_file > 0 and per_row > 0:
                    # The rows that fit in the file's remaining bytes, at the encoded size per
                    # Arrow byte this file has shown so far; at least one row.
                    left = self.max_bytes_per_file - current.size()
                    fit = max(1, int(left // (per_row * current.ratio())))
                    if fit < room:
                        room, cut = fit, True
                current.write(part.slice(offset, room))
                offset += room
                if cut and not (current.measured() or self._ratio is not None):
                    # The fit was a guess at 1 byte per Arrow byte: encode the buffered rows
                    # to measure, and fill the rest of the file at the measured ratio.
                    current.encode_pending()
                    cut = False
                if cut or self._full(current):
                    self._close(directory)

    def write_batches(self, batches: Iterable[Any]) -> list[WrittenFile]:
        """Write every batch, then close; on failure the open files are thrown away."""
        try:
            for batch in batches:
                self.write_batch(batch)
        except BaseException:
            self.abort()
            raise
        return self.close()

    def _full(self, current: OpenFile) -> bool:
        return ((self.max_rows_per_file > 0 and current.rows >= self.max_rows_per_file)
                or (self.max_bytes_per_file > 0 and current.size() >= self.max_bytes_per_file))

    def _file(self, directory: str, schema: Any) -> OpenFile:
        current = self._open.get(directory)
        if current is None:
            name = self.basename_template.replace("{i}", str(self._seq)) if self.basename_template \
                else file_name(self.task_index, self.job_id, self.attempt, self.fmt, self._seq,
                               self.unique)
            relative = posixpath.join(directory, name) if directory else name
            if self.on_file is not None:
                self.on_file(self._seq, relative)
            self._seq += 1
            current = self._open[directory] = OpenFile(
                self.fs, posixpath.join(self.base, relative), relative, schema, self.fmt,
                dict(self.options), 1.0 if self._ratio is None else self._ratio)
        return current

    def _close(self, directory: str) -> None:
        current = self._open.pop(directory)
        self.written.append(current.close())
        if current.measured():
            self._ratio = current.ratio()

    def close(self) -> list[WrittenFile]:
        """Finish every open file; what was written, in order."""
        for directory in sorted(self._open):
            self._close(directory)
        if self.empty_file_due():
            self._file("", self.schema)
            self._close("")
        return self.written

    def empty_file_due(self) -> bool:
        """Spark's rule: task 0 of an unpartitioned Parquet write writes a file with the
        schema and no rows when it received no rows (whatever the other tasks received).

        Only a schema that says every column's type: readers (pyarrow's datasets) take the
        columns from the first file, and other tasks' files must fit them. A schema of no
        columns (Ray's empty blocks after a filter by expression) or with a column of no
        type (Arrow's null: an empty pandas object column; a list of them) writes nothing:
        the other tasks' strings cannot be read as null."""
        return (self.task_index == 0 and self.fmt == "parquet" and not self.partition_by
                and not self.written and not self._open and self.schema is not None
                and len(self.schema.names) > 0 and all(fully_typed(t) for t in self.schema.types))

    def abort(self) -> None:
        for current in self._open.values():
            current.discard()
        self._open.clear()


def fully_typed(arrow_type: Any) -> bool:
    """Is the type known all the way down: no Arrow null in it (a list of nulls, a struct
    field of nulls)? Null is what pyarrow infers from values that say nothing."""
    import pyarrow as pa

    if pa.types.is_null(arrow_type):
        return False
    if pa.types.is_dictionary(arrow_type):
        return fully_typed(arrow_type.value_type)
    return all(fully_typed(arrow_type.field(i).type) for i in range(arrow_type.num_fields))


def write_table(fs: Any, base: str, table: Any, *, task_index: int, job_id: str, attempt: int,
                fmt: str = "parquet", partition_by: Sequence[str] = (), unique: bool = True,
                max_rows_per_file: int = 0, options: dict[str, Any] | None = None,
                on_file: Callable[[int, str], None] | None = None,
                max_chunk_rows: int = 64 * 1024) -> list[WrittenFile]:
    """Write an Arrow table (as batches of ``max_chunk_rows``) through a StreamingWriter."""
    writer = StreamingWriter(fs, base, task_index, job_id, attempt, fmt, partition_by, unique,
                             max_rows_per_file, 0, dict(options or {}), on_file)
    return writer.write_batches(table.to_batches(max_chunksize=max_chunk_rows))
