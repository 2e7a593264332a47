"""Partition columns as Spark discovers them, and pruning with a query's filters (no Spark
session: tests/core/spark/test_spark_read_partitions.py holds Spark itself to the same rules)."""

from __future__ import annotations

import datetime
import decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    GreaterThan,
    In,
    IsNotNull,
    IsNull,
    LessThanOrEqual,
    Not,
    StringStartsWith,
)
from pyspark.sql.types import (
    DateType,
    DecimalType,
    DoubleType,
    IntegerType,
    LongType,
    NullType,
    StringType,
    TimestampType,
)

from generative import budget
from outcommit.errors import OptionError
from outcommit.paths import escape_partition_value
from outcommit.spark.partitions import (
    cast_value,
    discover,
    infer_column_type,
    infer_value_type,
    parse_partition_path,
    unescape_path_name,
)
from outcommit.spark.pruning import Truth, evaluate, keeps

UTC = datetime.timezone.utc

#: Measured with Spark 4.3's own reader (spark.read.parquet of c=<raw>/ directories):
#: raw directory values -> the column's type. test_spark_read_partitions.py checks it again.
SPARK_MEASURED: list[tuple[list[str], Any]] = [
    (["7"], IntegerType()), (["007"], IntegerType()), (["+5"], IntegerType()), (["-0"], IntegerType()),
    (["2147483648"], LongType()), (["9223372036854775808"], DecimalType(19, 0)),
    (["12345678901234567890123456789012345678901"], DoubleType()),
    (["5."], DecimalType(1, 0)), (["1.0E1"], DecimalType(2, 0)), (["1E5"], DecimalType(6, 0)),
    (["1.0E10"], DecimalType(11, 0)), (["1.5"], DoubleType()), (["NaN"], DoubleType()),
    (["-Infinity"], DoubleType()), (["+NaN"], DoubleType()), (["1d"], DoubleType()), (["5f"], DoubleType()),
    ([" 5"], DoubleType()), (["0x1p3"], DoubleType()), ([".5"], DoubleType()), (["00.0"], DoubleType()),
    (["2024-05-01"], DateType()), (["2024-5-1"], StringType()), (["2024-02-30"], StringType()),
    (["2026-11-01 10%3A30%3A00"], TimestampType()), (["2026-11-01 10%3A30%3A00.5"], TimestampType()),
    (["2026-11-01 10%3A30%3A00.25"], StringType()), (["2026-11-01T10%3A30%3A00"], StringType()),
    (["true"], StringType()), (["a%2Fb"], StringType()), (["__HIVE_DEFAULT_PARTITION__"], NullType()),
    (["1_000"], StringType()), (["12345-01-01"], StringType()),
    (["7", "2147483648"], LongType()), (["7", "1.5"], DoubleType()), (["2147483648", "1.5"], StringType()),
    (["7", "99999999999999999999"], DecimalType(20, 0)), (["1.5", "99999999999999999999"], StringType()),
    (["2024-05-01", "2026-11-01 10%3A30%3A00"], TimestampType()), (["007", "abc"], StringType()),
    (["7", "2024-05-01"], StringType()), (["__HIVE_DEFAULT_PARTITION__", "7"], IntegerType()),
    (["5.", "1.5"], StringType()),
]


@pytest.mark.parametrize(("raws", "expected"), SPARK_MEASURED, ids=lambda v: repr(v))
def test_column_types_are_the_ones_spark_gives(raws: list[str], expected: Any) -> None:
    assert infer_column_type(raws, UTC) == expected


def test_values_are_read_again_as_the_column_type() -> None:
    columns, rows = discover(["c=007", "c=abc"], UTC)
    assert rows == [("007",), ("abc",)]          # a string column keeps the text as written
    columns, rows = discover(["c=7", "c=1.5"], UTC)
    assert rows == [(7.0,), (1.5,)]
    columns, rows = discover(["c=1E5/d=__HIVE_DEFAULT_PARTITION__", "c=7/d=x%3Dy"], UTC)
    assert [c.data_type for c in columns] == [DecimalType(10, 0), StringType()]
    assert rows == [(decimal.Decimal(100000), None), (decimal.Decimal(7), "x=y")]
    berlin = datetime.timezone(datetime.timedelta(hours=1))
    columns, rows = discover(["t=2024-05-01", "t=2026-11-01 10%3A30%3A00.5"], berlin)
    assert rows == [(datetime.datetime(2024, 5, 1, tzinfo=berlin),),
                    (datetime.datetime(2026, 11, 1, 10, 30, 0, 500_000, tzinfo=berlin),)]


def test_directories_are_parsed_as_spark_walks_them() -> None:
    assert parse_partition_path("year=2026/month=11") == [("year", "2026"), ("month", "11")]
    assert parse_partition_path("") == []
    assert parse_partition_path("a=1/_temporary/x") == [("a", "1")]   # Spark finds a=1 here too
    assert parse_partition_path("plain/a=1") == [("a", "1")]
    assert parse_partition_path("c%3Dd=1") == [("c=d", "1")]
    with pytest.raises(OptionError, match="empty partition column value"):
        parse_partition_path("a=")


def test_files_under_different_columns_are_refused() -> None:
    with pytest.raises(OptionError, match="conflicting partition directories"):
        discover(["date=2024-05-01", "day=2024-05-01"], UTC)


def test_a_given_type_that_does_not_fit_the_directories_is_refused() -> None:
    with pytest.raises(OptionError, match=r"'id' is int, but 'x' is not an integer"):
        discover(["id=1", "id=x"], UTC, given={"id": IntegerType()})


@pytest.mark.parametrize(("raw", "unescaped"), [
    ("%41", "A"), ("%4", "%4"), ("%+1", "\x01"), ("%-1", "%-1"), ("a%2", "a%2"), ("%%41", "%A"),
    ("Z%C3%BCrich", "ZÃ¼rich")])
def test_unescaping_is_sparks(raw: str, unescaped: str) -> None:
    assert unescape_path_name(raw) == unescaped


@pytest.mark.generative
@budget(200)
@given(st.one_of(st.text(), st.integers(), st.floats(), st.dates(), st.booleans(),
                 st.datetimes(timezones=st.just(UTC)), st.decimals(allow_nan=False, allow_infinity=False)))
def test_a_written_value_reads_back_with_its_text(value: Any) -> None:
    """Whatever outcommit's writers name a directory, the reader finds the value's text
    again (Spark's string cast of it), or null for null and the empty string. 200 examples,
    under a second."""
    name = escape_partition_value(value)
    if name == "__HIVE_DEFAULT_PARTITION__":
        assert cast_value(name, StringType(), UTC) is None
        return
    from outcommit.paths import partition_text

    assert cast_value(name, StringType(), UTC) == partition_text(value)


@pytest.mark.generative
@budget(200)
@given(st.lists(st.text(alphabet="0123456789.-+eEdfxpNaIinty:% _T", max_size=8).filter(bool),
                min_size=1, max_size=4))
def test_the_column_type_fits_every_value(raws: list[str]) -> None:
    """Every value reads as the inferred column type (no ValueError), whatever order the
    files come in. 200 examples, under a second."""
    data_type = infer_column_type(raws, UTC)
    assert infer_column_type(raws[::-1], UTC) == data_type
    for raw in raws:
        cast_value(raw, data_type, UTC)
    if len(raws) == 1:
        assert data_type == infer_value_type(raws[0], UTC)


# -- pruning -------------------------------------------------------------------------------------------
DAY = datetime.date(2024, 5, 1)


@pytest.mark.parametrize(("condition", "values", "truth"), [
    (EqualTo(("date",), DAY), {"date": DAY}, Truth.TRUE),
    (EqualTo(("date",), DAY), {"date": datetime.date(2024, 5, 2)}, Truth.FALSE),
    (EqualTo(("date",), DAY), {"date": None}, Truth.NULL),
    (Not(EqualTo(("date",), DAY)), {"date": None}, Truth.NULL),
    (EqualNullSafe(("date",), None), {"date": None}, Truth.TRUE),
    (IsNull(("date",)), {"date": DAY}, Truth.FALSE),
    (IsNotNull(("date",)), {"date": DAY}, Truth.TRUE),
    (In(("n",), (1, 2)), {"n": 3}, Truth.FALSE),
    (In(("n",), (1, None)), {"n": 3}, Truth.NULL),
    (GreaterThan(("n",), 2), {"n": 3}, Truth.TRUE),
    (LessThanOrEqual(("x",), 1.0), {"x": float("nan")}, Truth.UNKNOWN),   # Spark orders NaN last
    (EqualTo(("n",), 2**53 + 1), {"n": float(2**53)}, Truth.UNKNOWN),      # compared as doubles
    (EqualTo(("d",), 0.1), {"d": decimal.Decimal("0.1")}, Truth.UNKNOWN),
    (StringStartsWith(("s",), "ab"), {"s": "abc"}, Truth.TRUE),
    (EqualTo(("amount",), 1), {"date": DAY}, Truth.UNKNOWN),                # a data column
    (EqualTo(("s", "field"), 1), {"s": "x"}, Truth.UNKNOWN),               # a nested field
    (EqualTo(("ts",), datetime.datetime(2024, 5, 1)),
     {"ts": datetime.datetime(2024, 5, 1, tzinfo=UTC)}, Truth.UNKNOWN),    # naive against aware
])
def test_filters_on_partition_values(condition: Any, values: dict[str, Any], truth: Truth) -> None:
    assert evaluate(condition, values) is truth


def test_a_file_is_kept_unless_a_filter_rules_it_out() -> None:
    filters = [IsNotNull(("date",)), EqualTo(("date",), DAY), GreaterThan(("amount",), 5)]
    assert keeps(filters, {"date": DAY})
    assert not keeps(filters, {"date": datetime.date(2024, 5, 2)})
    assert not keeps(filters, {"date": None})
    assert keeps([], {})
