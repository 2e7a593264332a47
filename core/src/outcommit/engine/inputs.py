"""What :func:`outcommit.write_dataset` accepts, as one schema and a stream of record batches.

pyarrow's inputs (Table, RecordBatch, RecordBatchReader, Dataset, Scanner, an iterable of
batches) and anything that exports an Arrow C stream (``__arrow_c_stream__``: Polars and
pandas >= 2.2 DataFrames, DuckDB relations) become a :class:`BatchStream`. Nothing is
materialised: batches are pulled from the source while the task writes them, sliced to at
most ``MAX_BATCH_ROWS`` rows (a producer that hands over one batch of its whole frame
would otherwise make the writer split the whole frame by partition at once).

A stream that can be read only once (a reader, a generator, an exported C stream) says
so (``replayable``): the engine must not retry a task on it, since a second attempt would
find the stream drained and commit nothing, silently.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

MAX_BATCH_ROWS = 64 * 1024

ACCEPTED = ("a pyarrow Table, RecordBatch, RecordBatchReader, Dataset or Scanner, an iterable of "
            "RecordBatches, or an object with __arrow_c_stream__ (Polars DataFrames, pandas >= 2.2 "
            "DataFrames, DuckDB relations)")


class BatchStream:
    """A schema and the batches to write; iterable again only if ``replayable``."""

    def __init__(self, schema: Any, batches: Any, replayable: bool, target: Any = None) -> None:
        self.schema = target if target is not None else schema
        self._source_schema = schema
        self._batches = batches          # a callable giving a fresh iterator, or an iterator
        self.replayable = replayable
        self._target = target
        self._started = False

    def __iter__(self) -> Iterator[Any]:
        if self._started and not self.replayable:
            # A retried attempt would get a drained stream and commit no rows.
            raise RuntimeError("this input can be read only once: the write cannot be retried")
        self._started = True
        source = self._batches() if callable(self._batches) else self._batches
        for batch in source:
            if self._target is not None:
                batch = conform(batch, self._target)
            yield from sliced(batch)


def sliced(batch: Any) -> Iterator[Any]:
    """``batch`` in zero-copy slices of at most MAX_BATCH_ROWS rows."""
    if batch.num_rows <= MAX_BATCH_ROWS:
        yield batch
        return
    for offset in range(0, batch.num_rows, MAX_BATCH_ROWS):
        yield batch.slice(offset, MAX_BATCH_ROWS)


def conform(batch: Any, schema: Any) -> Any:
    """``batch`` with ``schema``'s columns, in its order and types (pyarrow's ``schema=``)."""
    import pyarrow as pa

    missing = [name for name in schema.names if name not in batch.schema.names]
    if missing:
        raise ValueError(f"the data has no column {missing[0]!r} of the schema given "
                         f"(it has {', '.join(batch.schema.names)})")
    table = pa.Table.from_batches([batch]).select(schema.names).cast(schema)
    return table.combine_chunks().to_batches()[0] if table.num_rows else pa.RecordBatch.from_pylist(
        [], schema=schema)


def batch_stream(data: Any, schema: Any = None) -> BatchStream:
    """``data`` as a :class:`BatchStream`; a TypeError naming what is accepted otherwise."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    if isinstance(data, pa.Table):
        return BatchStream(data.schema, lambda: data.to_batches(max_chunksize=MAX_BATCH_ROWS), True,
                           schema)
    if isinstance(data, pa.RecordBatch):
        return BatchStream(data.schema, lambda: [data], True, schema)
    if isinstance(data, pa.RecordBatchReader):
        return BatchStream(data.schema, data, False, schema)
    if isinstance(data, ds.Dataset):
        return BatchStream(data.schema, data.to_batches, True, schema)
    if isinstance(data, ds.Scanner):
        return BatchStream(data.projected_schema, data.to_reader(), False, schema)
    if hasattr(data, "__arrow_c_stream__"):
        reader = pa.RecordBatchReader.from_stream(data)
        return BatchStream(reader.schema, reader, False, schema)
    if isinstance(data, Iterable) and not isinstance(data, (str, bytes, dict)):
        return _iterable(data, schema)
    raise TypeError(f"write_dataset cannot write a {type(data).__module__}.{type(data).__qualname__}: "
                    f"give it {ACCEPTED}")


def _iterable(data: Iterable[Any], schema: Any) -> BatchStream:
    """Batches from a list or tuple (replayable) or an iterator (once); the first one tells
    the schema (unless ``schema`` is given: then every batch is cast to it)."""
    import itertools

    import pyarrow as pa

    iterator = iter(data)
    first = next(iterator, None)
    if first is None:
        return BatchStream(schema, lambda: [], True, None)
    if not isinstance(first, pa.RecordBatch):
        raise TypeError(f"write_dataset was given an iterable of {type(first).__qualname__}: an "
                        f"iterable must yield pyarrow RecordBatches; or give it {ACCEPTED}")

    def checked(batches: Iterable[Any]) -> Iterator[Any]:
        for batch in batches:
            if not isinstance(batch, pa.RecordBatch) or (schema is None and batch.schema != first.schema):
                raise TypeError("every item of an iterable given to write_dataset must be a pyarrow "
                                f"RecordBatch with the first one's schema, or pass schema= "
                                f"(first: {first.schema.to_string(show_schema_metadata=False)})")
            yield batch

    if isinstance(data, (list, tuple)):
        return BatchStream(first.schema, lambda: checked(data), True, schema)
    return BatchStream(first.schema, checked(itertools.chain([first], iterator)), False, schema)
