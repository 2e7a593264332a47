"""Spark itself is the oracle: ``spark.read.format("outcommit")`` gives a directory's
partition columns the types and values ``spark.read.parquet`` gives them, and pruning with
a query's filters keeps every row Spark keeps."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_read_partitions import SPARK_MEASURED

import outcommit.spark
from generative import budget
from outcommit.paths import escape_partition_value

pytestmark = pytest.mark.spark


def write_table(root: Path, columns: list[list[str]]) -> None:
    """File ``n`` under ``c0=<columns[0][n]>/c1=<columns[1][n]>/...``, holding ``x = n``."""
    files = len(columns[0]) if columns else 1
    for n in range(files):
        directory = root.joinpath(*(f"c{i}={values[n]}" for i, values in enumerate(columns)))
        directory.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table({"x": [n, n + 100]}), directory / f"part-{n:05d}.parquet")


def rows(df: Any) -> list[str]:
    """Rows as text, NaN included (nan != nan would hide a match)."""
    return sorted(repr(tuple(r)) for r in df.collect())


def both(spark: Any, root: Path) -> tuple[Any, Any]:
    native = spark.read.parquet(str(root))
    ours = spark.read.format("outcommit").option("requireSuccess", "false").load(f"file://{root}")
    return native, ours


def test_every_measured_value_is_typed_and_read_as_spark_reads_it(spark: Any, tmp_path: Path) -> None:
    """The table test_read_partitions.py holds, against the running Spark: one directory
    tree, a column per case, two files (a single-value case names its value twice)."""
    columns = [[raws[0], raws[-1]] for raws, _ in SPARK_MEASURED]
    write_table(tmp_path, columns)
    native, ours = both(spark, tmp_path)
    assert ours.schema == native.schema
    assert [f.dataType for f in ours.schema.fields[1:]] == [t for _, t in SPARK_MEASURED]
    assert rows(ours) == rows(native)


@pytest.fixture
def pushdown(spark: Any) -> Iterator[Any]:
    """The session with Python filter pushdown on, registered after it was set."""
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    outcommit.spark.register(spark)
    try:
        yield spark
    finally:
        spark.conf.unset("spark.sql.python.filterPushdown.enabled")
        outcommit.spark.register(spark)


TRICKY = sorted({raw for raws, _ in SPARK_MEASURED for raw in raws})
DATETIMES = st.datetimes(min_value=datetime.datetime(1900, 1, 1), max_value=datetime.datetime(2100, 1, 1))
RAW_VALUES = st.one_of(
    st.sampled_from(TRICKY),
    st.integers(-(2**70), 2**70).map(str),
    st.floats().map(escape_partition_value),
    st.decimals(allow_nan=False, allow_infinity=False, places=0).map(str),
    st.decimals(allow_nan=False, allow_infinity=False, places=2).map(str),
    st.dates(min_value=datetime.date(1000, 1, 1)).map(escape_partition_value),
    DATETIMES.map(lambda d: escape_partition_value(d.replace(microsecond=d.microsecond // 10**5 * 10**5))),
    DATETIMES.map(escape_partition_value),
    st.text(alphabet="0123456789.-+eEdfx :%_aN/=", min_size=1, max_size=6).map(escape_partition_value),
)


@st.composite
def tables(draw: Any) -> list[list[str]]:
    files = draw(st.integers(1, 4))
    return draw(st.lists(st.lists(RAW_VALUES, min_size=files, max_size=files), min_size=1, max_size=3))


@pytest.mark.generative
@budget(8)
@given(table=tables(), data=st.data())
def test_drawn_directories_read_as_spark_reads_them(pushdown: Any, tmp_path_factory: pytest.TempPathFactory,
                                                    table: list[list[str]], data: st.DataObject) -> None:
    """Drawn partition values (Spark's tricky cases, integers past bigint, Java's doubles,
    decimals, dates, timestamps with and without a fractional digit, escaped text): the
    schema and rows equal Spark's own reader's; then a filter on a drawn column keeps
    exactly Spark's rows, with pruning (filter pushdown on). 8 examples in CI, about a
    minute on this machine (Spark plans each read in fresh Python processes)."""
    from pyspark.sql import functions as F

    root = tmp_path_factory.mktemp("drawn") / uuid.uuid4().hex[:8]
    write_table(root, table)
    native, ours = both(pushdown, root)
    assert ours.schema == native.schema
    assert rows(ours) == rows(native)
    column = f"c{data.draw(st.integers(0, len(table) - 1), label='column')}"
    values = [r[column] for r in native.select(column).collect()]
    value = data.draw(st.sampled_from(values), label="value")
    kind = data.draw(st.sampled_from(["=", ">=", "is null"]), label="filter")
    if kind == "is null" or value is None:
        condition = F.col(column).isNull()
    else:
        condition = F.col(column) >= F.lit(value) if kind == ">=" else F.col(column).eqNullSafe(F.lit(value))
    assert rows(ours.where(condition)) == rows(native.where(condition))
