"""The file formats: what each can be written with, and one file being written in one.

:class:`OpenFile` encodes the rows it is given into a store stream (Parquet row groups
of at most ``row_group_size`` rows and about ROW_GROUP_BYTES of Arrow data, CSV, JSON
lines) and measures what they took: the ratio of encoded to Arrow bytes that
:class:`~outcommit.engine.writer.StreamingWriter`'s byte budget is estimated with. Its own
module because that is all it knows; when to open, roll over or close a file is the
writer's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError

FORMATS = ("parquet", "csv", "json")
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



@dataclass(frozen=True)
class WrittenFile:
    path: str          # relative to the work path
    rows: int
    bytes: int



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


class OpenFile:
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

