"""Hive partitioning of Arrow rows: which columns can name a directory, and the rows of
each ``col=value/`` directory, without the partition columns.

Its own module because both the writer (each batch's rows) and the local engine's check
before a job starts (the partition columns' types) ask it, and because its one rule is
subtle: two values Spark would name alike must never share a directory (they would read
back as one value).
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import Any

from ..errors import ConfigError, UnsupportedWriteError
from ..paths import escape_partition_value


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

