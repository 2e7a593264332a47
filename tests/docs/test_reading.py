"""docs/reading.md's table of readers is what the readers do: every row is run here
(the Spark row in tests/core/spark/test_spark_reading.py) against the page's scenario."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from outcommit.read import committed_files, dataset


def polars_rows(source: Any) -> int:
    pl = pytest.importorskip("polars")
    return int(pl.scan_parquet(source).select(pl.len()).collect().item())


def duckdb_rows(source: Any) -> int:
    duckdb = pytest.importorskip("duckdb")
    row = duckdb.execute("select count(*) from read_parquet(?, hive_partitioning=true)",
                         [source]).fetchone()
    assert row is not None
    return int(row[0])


def pyarrow_dataset_rows(dest: str) -> int:
    import pyarrow.dataset as ds

    return int(ds.dataset(dest, format="parquet", partitioning="hive").count_rows())


def pyarrow_table_rows(dest: str) -> int:
    import pyarrow.parquet as pq

    return int(pq.read_table(dest).num_rows)


def pandas_rows(dest: str) -> int:
    pandas = pytest.importorskip("pandas")
    return len(pandas.read_parquet(dest))


# Reader call, as the table spells it -> rows read, given (url, local path).
READERS: dict[str, Callable[[str, str], int]] = {
    'pyarrow.dataset.dataset(dest, format="parquet", partitioning="hive")':
        lambda url, dest: pyarrow_dataset_rows(dest),
    "pyarrow.parquet.read_table(dest)": lambda url, dest: pyarrow_table_rows(dest),
    "pandas.read_parquet(dest)": lambda url, dest: pandas_rows(dest),
    "polars.scan_parquet(dest)": lambda url, dest: polars_rows(dest),
    'polars.scan_parquet(dest + "/**/*.parquet")': lambda url, dest: polars_rows(dest + "/**/*.parquet"),
    'polars.scan_parquet(dest + "/*/*.parquet")': lambda url, dest: polars_rows(dest + "/*/*.parquet"),
    "duckdb read_parquet(dest)": lambda url, dest: duckdb_rows(dest),
    "duckdb read_parquet(dest/**/*.parquet)": lambda url, dest: duckdb_rows(dest + "/**/*.parquet"),
    "duckdb read_parquet(dest/*/*.parquet)": lambda url, dest: duckdb_rows(dest + "/*/*.parquet"),
    "outcommit.read.committed_files(dest)": lambda url, dest: duckdb_rows(committed_files(url)),
    "outcommit.read.dataset(dest)": lambda url, dest: int(dataset(url).count_rows()),
}

# Run where their engine runs (tests/core/spark/test_spark_reading.py).
ENGINE_ROWS = {"spark.read.parquet(dest)", 'spark.read.format("outcommit").load(dest)'}


def test_every_row_of_the_table_is_run(reading_table):
    assert set(reading_table) == set(READERS) | ENGINE_ROWS


@pytest.mark.parametrize("call", sorted(READERS))
def test_the_table_says_what_the_reader_reads(call, reading_table, running_v1_destination):
    dest = running_v1_destination.removeprefix("file://")
    try:
        rows = str(READERS[call](running_v1_destination, dest))
    except pytest.skip.Exception:
        raise
    except Exception as error:  # a reader's refusal is a documented outcome
        assert reading_table[call] == "error", f"{call} failed: {error}"
        rows = "error"
    assert rows == reading_table[call], f"docs/reading.md says {call} reads {reading_table[call]}"
