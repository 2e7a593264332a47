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
including the magic committer's, because files are written through ``fs.open``.
"""

from __future__ import annotations

import datetime
import json
import posixpath
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError, UnsupportedWriteError
from ..paths import escape_partition_value

FORMATS = ("parquet", "csv", "json")
_EXTENSIONS = {"parquet": "parquet", "csv": "csv", "json": "json"}
#: Rows gathered before a Parquet row group is written (unless ``row_group_size`` says).
DEFAULT_ROW_GROUP_ROWS = 128 * 1024
#: Bytes (Arrow) gathered before a Parquet row group is written, whatever the rows.
ROW_GROUP_BYTES = 64 * 1024 * 1024


#: Spark's Parquet codec names -> pyarrow's (None: Spark has it, pyarrow cannot write it).
PARQUET_CODECS: dict[str, str | None] = {
    "none": "none", "uncompressed": "none", "snappy": "snappy", "gzip": "gzip", "zstd": "zstd",
    "lz4": "lz4", "lz4_raw": "lz4_raw", "brotli": "brotli", "lzo": None}


def check_compression(fmt: str, value: str | None) -> str | None:
    """The pyarrow codec for a ``compression`` setting (Spark's names), None for none given;
    a codec the format or this pyarrow cannot write is a ConfigError, before any task runs."""
    import pyarrow as pa

    if value is None or not str(value).strip():
        return None
    name = str(value).strip().lower()
    if fmt != "parquet":
        if name in ("none", "uncompressed"):
            return None
        raise ConfigError(f"compression={value!r}: outcommit writes {fmt} files uncompressed "
                          "(compression applies to parquet): leave the option out or use none")
    if name not in PARQUET_CODECS:
        raise ConfigError(f"unknown Parquet compression {value!r}: use one of "
                          f"{', '.join(c for c, v in PARQUET_CODECS.items() if v)}")
    codec = PARQUET_CODECS[name]
    if codec is None:
        raise ConfigError(f"Parquet compression {value!r} cannot be written with pyarrow: use one "
                          f"of {', '.join(c for c, v in PARQUET_CODECS.items() if v)}")
    if codec != "none" and not pa.Codec.is_available(codec):
        raise ConfigError(f"Parquet compression {value!r}: this pyarrow was built without {codec}")
    return codec


def partition_type_problem(arrow_type: Any) -> str | None:
    """Why a column of this Arrow type cannot be a partition column, or None if it can."""
    import pyarrow as pa

    if pa.types.is_nested(arrow_type) or pa.types.is_null(arrow_type):
        return "Spark refuses it for a partition column (INVALID_PARTITION_COLUMN_DATA_TYPE)"
    if pa.types.is_binary(arrow_type) or pa.types.is_large_binary(arrow_type) \
            or pa.types.is_fixed_size_binary(arrow_type):
        return "outcommit cannot name a directory after binary values"
    return None


def check_partition_types(schema: Any, columns: Sequence[str]) -> None:
    """Refuse partition columns whose type cannot name a directory (Arrow schema)."""
    for column in columns:
        if column in schema.names:
            problem = partition_type_problem(schema.field(column).type)
            if problem:
                raise ConfigError(f"cannot use {schema.field(column).type} for partition column "
                                  f"{column!r}: {problem}; partition by atomic columns (strings, "
                                  "numbers, booleans, dates, timestamps, decimals)")


@dataclass(frozen=True)
class WrittenFile:
    path: str          # relative to the work path
    rows: int
    bytes: int


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


def row_numbers(count: int) -> Any:
    """0 .. count-1 as an Arrow array, built by Arrow: ``pa.array(range(count))`` makes a
    Python int of each (1.5 s per 10M rows), and numpy is not a dependency."""
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.indices_nonzero(pc.is_null(pa.nulls(count, pa.bool_())))


def split_by_partition(batch: Any, columns: Sequence[str],
                       seen: dict[str, Any] | None = None) -> list[tuple[str, Any]]:
    """(``col=value/...`` directory, rows without the partition columns) for each partition
    value in ``batch``; one hash grouping, whatever the number of partitions.

    ``seen``: directory -> the partition values named so far (by this task). Two different
    values named alike (a timestamp's wall time in the hour a clock is set back, once in
    each offset) are refused: their rows would be read back as one value."""
    import pyarrow as pa

    if not columns:
        return [("", batch)]
    missing = [c for c in columns if c not in batch.schema.names]
    if missing:
        raise ConfigError(f"partition columns not in the data: {', '.join(missing)}")
    data_columns = [c for c in batch.schema.names if c not in columns]
    keyed = pa.table({**{c: batch.column(c) for c in columns},
                      "__row": row_numbers(batch.num_rows)})
    groups = keyed.group_by(list(columns), use_threads=False).aggregate([("__row", "list")])
    # Each group's rows are a zero-copy slice of the lists' values (its row numbers, in
    # input order); only the few keys become Python objects. One copy per group: a slice of
    # one copy of the whole batch would keep all of it alive while any open file buffers a
    # few of its rows.
    rows = groups.column("__row_list").combine_chunks()
    numbers, offsets = rows.flatten(), rows.offsets.to_pylist()
    data = batch.select(data_columns)
    out = []
    single = {c: pa.types.is_float32(batch.schema.field(c).type) for c in columns}
    for index, key in enumerate(groups.select(list(columns)).to_pylist()):
        directory = "/".join(f"{c}={escape_partition_value(key[c], single[c])}" for c in columns)
        if seen is not None:
            values = tuple(_same_value(key[c]) for c in columns)
            if seen.setdefault(directory, values) != values:
                raise UnsupportedWriteError(
                    f"partition values {seen[directory]} and {values} of {', '.join(columns)} "
                    f"would share the directory {directory!r} (as Spark names it), and read "
                    "back as one value: partition by a column that tells them apart (for "
                    "timestamps in a clock change, UTC or a date)")
        start, stop = offsets[index] - offsets[0], offsets[index + 1] - offsets[0]
        out.append((directory, data.take(numbers.slice(start, stop - start))))
    return sorted(out, key=lambda item: item[0])


def _same_value(value: Any) -> Any:
    """``value`` for comparing partition values: NaN equal to NaN, a timestamp as its instant."""
    if isinstance(value, float) and value != value:
        return "NaN"
    if isinstance(value, datetime.datetime) and value.tzinfo is not None:
        # Aware datetimes of one zone compare by wall time, ignoring fold: by the instant.
        return value.astimezone(datetime.timezone.utc)
    return value


class _Sink:
    """The store stream as a format writer (pyarrow's ParquetWriter, CSVWriter) sees it.

    A failed attempt throws its stream away (a magic upload is aborted, not saved), but
    pyarrow's ParquetWriter, left open, closes itself when it is collected and writes its
    footer then, into a stream that is gone: 'Exception ignored in: ParquetWriter.__del__
    ... File not in write mode' on every retried task. Once :meth:`detach` is called the
    sink takes the writer's last bytes and drops them, so the writer is closed at once.
    """

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.detached = False

    def detach(self) -> None:
        self.detached = True

    def write(self, data: Any) -> int:
        if self.detached:
            return len(memoryview(data))
        return int(self.stream.write(data))

    def tell(self) -> int:
        return int(self.stream.tell())

    def flush(self) -> None:
        if not self.detached:
            self.stream.flush()

    @property
    def closed(self) -> bool:
        # Detached, the sink still takes bytes: pyarrow writes none into a closed file.
        return False if self.detached else bool(self.stream.closed)

    def writable(self) -> bool:
        return True


class _OpenFile:
    """One file being written in one partition directory, in one format."""

    def __init__(self, fs: Any, path: str, relative: str, schema: Any, fmt: str,
                 options: dict[str, Any], ratio: float = 1.0) -> None:
        self.relative = relative
        self.start_ratio = ratio       # the estimate until this file has encoded rows
        self.fmt = fmt
        self.rows = 0
        self.stream = fs.open(path, "wb")
        self.sink = _Sink(self.stream)  # what the format writer writes to (see _Sink)
        self.writer: Any = None
        self.pending: list[Any] = []   # Parquet: batches of the row group being filled
        self.pending_rows = 0
        self.pending_bytes = 0
        self.arrow_flushed = 0         # Arrow bytes of the rows encoded into the stream
        self.encoded_flushed = 0       # what they took in the stream
        self.row_group_rows = int(options.get("row_group_size") or DEFAULT_ROW_GROUP_ROWS)
        try:
            if fmt == "parquet":
                import pyarrow.parquet as pq

                kwargs = {k: v for k, v in options.items() if k != "row_group_size"}
                self.writer = pq.ParquetWriter(self.sink, schema, **kwargs)
            elif fmt == "csv":
                import pyarrow.csv as pacsv

                self.writer = pacsv.CSVWriter(self.sink, schema)
        except BaseException:
            self.discard()
            raise

    def write(self, batch: Any) -> None:
        self.rows += batch.num_rows
        if self.fmt == "parquet":
            self.pending.append(batch)
            self.pending_rows += batch.num_rows
            self.pending_bytes += batch.nbytes
            # Full row groups go out as they fill: at most ``row_group_rows`` rows and about
            # ROW_GROUP_BYTES (Arrow) each; the rest waits for the next batch.
            while self.pending_rows and (self.pending_rows >= self.row_group_rows
                                         or self.pending_bytes >= ROW_GROUP_BYTES):
                self._flush_row_group(self._group_rows())
            return
        before = int(self.stream.tell())
        if self.fmt == "csv":
            self.writer.write_batch(batch)
        else:
            for row in batch.to_pylist():
                self.stream.write(json.dumps(row, default=str, ensure_ascii=False).encode("utf-8"))
                self.stream.write(b"\n")
        self._encoded(batch.nbytes, int(self.stream.tell()) - before)

    def _group_rows(self) -> int:
        """Rows of the next row group: ``row_group_rows``, fewer if they exceed ROW_GROUP_BYTES."""
        per_row = self.pending_bytes / self.pending_rows
        by_bytes = max(1, int(ROW_GROUP_BYTES // per_row)) if per_row > 0 else self.pending_rows
        return min(self.pending_rows, self.row_group_rows, by_bytes)

    def _flush_row_group(self, rows: int | None = None) -> None:
        """Write the first ``rows`` pending rows (all by default) as one row group."""
        import pyarrow as pa

        if not self.pending:
            return
        table = pa.Table.from_batches(self.pending)
        rows = table.num_rows if rows is None else rows
        group, rest = table.slice(0, rows), table.slice(rows)
        group_bytes = group.nbytes
        before = int(self.stream.tell())
        self.writer.write_table(group, row_group_size=max(rows, 1))
        self._encoded(group_bytes, int(self.stream.tell()) - before)
        # The rest: zero-copy slices of the pending batches, kept for the next row group.
        self.pending = rest.to_batches() if rest.num_rows else []
        self.pending_rows = rest.num_rows
        self.pending_bytes = rest.nbytes if rest.num_rows else 0

    def _encoded(self, arrow_bytes: int, encoded_bytes: int) -> None:
        self.arrow_flushed += arrow_bytes
        self.encoded_flushed += encoded_bytes

    def measured(self) -> bool:
        return self.arrow_flushed > 0 and self.encoded_flushed > 0

    def encode_pending(self) -> None:
        """Parquet: write the rows buffered so far as a row group now."""
        if self.fmt == "parquet":
            self._flush_row_group()

    def ratio(self) -> float:
        """Encoded bytes per Arrow byte of the rows this file has encoded so far (before any:
        the previous file's, or 1)."""
        if not self.measured():
            return self.start_ratio
        return self.encoded_flushed / self.arrow_flushed

    def size(self) -> int:
        """Bytes written so far (what the store stream has taken), plus the estimated encoded
        size of the rows buffered for the row group being filled."""
        return int(self.stream.tell()) + int(self.pending_bytes * self.ratio())

    def close(self) -> WrittenFile:
        if self.fmt == "parquet":
            self._flush_row_group()
        if self.writer is not None:
            self.writer.close()
        written = int(self.stream.tell())
        self.stream.close()
        return WrittenFile(self.relative, self.rows, written)

    def discard(self) -> None:
        """A failed write: the stream is thrown away (a magic upload is aborted, not saved),
        and the format writer is closed into nothing (:class:`_Sink`)."""
        self.sink.detach()
        if self.writer is not None:
            try:
                self.writer.close()
            except Exception:  # the attempt is failing already; its own error is the one to see
                pass
        discard = getattr(self.stream, "discard", None)
        try:
            if discard is not None:
                discard()
            else:
                self.stream.close()
        except Exception:
            pass


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
    _open: dict[str, _OpenFile] = field(default_factory=dict)
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

    def _full(self, current: _OpenFile) -> bool:
        return ((self.max_rows_per_file > 0 and current.rows >= self.max_rows_per_file)
                or (self.max_bytes_per_file > 0 and current.size() >= self.max_bytes_per_file))

    def _file(self, directory: str, schema: Any) -> _OpenFile:
        current = self._open.get(directory)
        if current is None:
            name = self.basename_template.replace("{i}", str(self._seq)) if self.basename_template \
                else file_name(self.task_index, self.job_id, self.attempt, self.fmt, self._seq,
                               self.unique)
            relative = posixpath.join(directory, name) if directory else name
            if self.on_file is not None:
                self.on_file(self._seq, relative)
            self._seq += 1
            current = self._open[directory] = _OpenFile(
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
