"""Partition columns from directory names, as Spark's file sources discover them.

A reader of outcommit's output must give ``date=2024-05-01/`` the column Spark's own
reader gives it, or the same table reads differently through ``format("outcommit")`` and
``spark.read.parquet``. Spark's rules (``PartitioningUtils`` in Spark 4.3, checked against
Spark itself by ``tests/core/spark/test_spark_read_partitions.py``):

* each value is typed on its own, first match: ``int``, ``bigint`` (Java's
  ``Integer``/``Long.parseLong``: optional sign, digits), ``decimal(p,0)`` (a
  ``BigDecimal`` with no fractional digits left, such as ``5.``, ``1E5``, ``1.0E10`` or an
  integer beyond ``bigint``; at most 38 digits), ``double`` (Java's ``Double.parseDouble``:
  ``1.5``, ``NaN``, ``Infinity``, ``1d``, hex), ``timestamp`` (``yyyy-MM-dd HH:mm:ss`` with
  at most one fractional digit, in the session time zone), ``date`` (``yyyy-MM-dd``), else a
  string; ``__HIVE_DEFAULT_PARTITION__`` is null;
* a column's type is the widest of its values' (int + bigint = bigint, int + double =
  double, integers + decimal = decimal, date + timestamp = timestamp; bigint or decimal +
  double, or anything else mixed, is a string; null fits everything; all null is ``void``);
* each value is then read again as that type from its text: a string column keeps the text
  as written (``007`` stays ``007``), a double column reads ``7`` as ``7.0``.

Values are unescaped as Spark unescapes them (``%XX`` is the one character XX), which
reverses :func:`outcommit.paths.escape_partition_value`, the name outcommit's writers give.
"""

from __future__ import annotations

import datetime
import decimal
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import reduce
from typing import Any
from zoneinfo import ZoneInfo

from pyspark.sql.types import (
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    NullType,
    ShortType,
    StringType,
    TimestampNTZType,
    TimestampType,
)

from ..errors import OptionError
from ..paths import HIVE_DEFAULT_PARTITION

_INT = re.compile(r"[+-]?\d+")
# java.math.BigDecimal(String): digits with an optional point, an optional exponent.
_BIG_DECIMAL = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
# java.lang.Double.parseDouble, after String.trim(): ASCII digits, an optional f/d suffix.
_JAVA_DOUBLE = re.compile(
    r"(?P<sign>[+-]?)(?:(?P<special>NaN|Infinity)|(?P<number>(?:[0-9]+\.?[0-9]*|\.[0-9]+)"
    r"(?:[eE][+-]?[0-9]+)?)|(?P<hex>0[xX](?:[0-9a-fA-F]+\.?|[0-9a-fA-F]*\.[0-9a-fA-F]+)[pP][+-]?[0-9]+))"
    r"[fFdD]?")
# Spark's partition timestamp pattern "yyyy-MM-dd HH:mm:ss[.S]": one fractional digit at most.
_TIMESTAMP = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2}) ([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]))?")
_DATE = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})")
_INT_RANGE = (-(2**31), 2**31 - 1)
_LONG_RANGE = (-(2**63), 2**63 - 1)
MAX_DECIMAL_DIGITS = 38


def unescape_path_name(text: str) -> str:
    """Spark's ``ExternalCatalogUtils.unescapePathName``: ``%XX`` (two hex digits, as
    ``Integer.parseInt(_, 16)`` reads them) is the one character XX; anything else stays."""
    out: list[str] = []
    i = 0
    while i < len(text):
        if text[i] == "%" and i + 2 < len(text):
            code = _java_hex(text[i + 1:i + 3])
            if code is not None:
                out.append(chr(code))
                i += 3
                continue
        out.append(text[i])
        i += 1
    return "".join(out)


def _java_hex(digits: str) -> int | None:
    """``Integer.parseInt(digits, 16)`` when it is not negative (``+1`` parses, ``-1`` is skipped)."""
    if not re.fullmatch(r"\+?[0-9a-fA-F]+", digits):
        return None
    return int(digits, 16)


def parse_partition_path(relative_dir: str) -> list[tuple[str, str]]:
    """The ``(column, raw value)`` pairs of a file's directory below the destination.

    Spark's ``parsePartition`` walks from the file's directory up: ``name=value``
    components are columns; a component without ``=`` ends the walk once a column was
    found (``a=1/_temporary/x`` still finds ``a``). Raw values stay escaped.
    """
    columns: list[tuple[str, str]] = []
    for component in reversed([c for c in relative_dir.split("/") if c]):
        name, equals, raw = component.partition("=")
        if not equals:
            if columns:
                break
            continue
        if not name:
            raise OptionError(f"empty partition column name in {component!r} (directory {relative_dir!r})")
        if not raw:
            raise OptionError(f"empty partition column value in {component!r} (directory {relative_dir!r})")
        columns.append((unescape_path_name(name), raw))
    return columns[::-1]


# -- typing one value ---------------------------------------------------------------------------
def _java_double(raw: str) -> float | None:
    match = _JAVA_DOUBLE.fullmatch(raw.strip("".join(chr(c) for c in range(0x21))))
    if match is None:
        return None
    sign = -1.0 if match["sign"] == "-" else 1.0
    if match["special"]:
        return float("nan") if match["special"] == "NaN" else sign * float("inf")
    if match["hex"]:
        return sign * float.fromhex(match["hex"])
    return sign * float(match["number"])


def _integral_decimal(raw: str) -> decimal.Decimal | None:
    """``new BigDecimal(raw)`` when it has no fractional digits (scale <= 0), as an integer
    value of at most 38 digits; None otherwise."""
    if not _BIG_DECIMAL.fullmatch(raw):
        return None
    value = decimal.Decimal(raw)
    exponent = value.as_tuple().exponent
    assert isinstance(exponent, int)  # finite: the pattern admits no NaN or Infinity
    if exponent < 0:  # fractional digits, even zeros ("1.0"): Spark's require(scale <= 0)
        return None
    integral = value.quantize(decimal.Decimal(1), context=decimal.Context(prec=1000))
    return integral if _digits(integral) <= MAX_DECIMAL_DIGITS else None


def _digits(value: decimal.Decimal) -> int:
    return max(1, len(value.as_tuple().digits)) if value else 1


def _timestamp(text: str, zone: datetime.tzinfo) -> datetime.datetime | None:
    match = _TIMESTAMP.fullmatch(text)
    if match is None:
        return None
    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    fraction = int(match[7] or 0) * 100_000
    try:
        return datetime.datetime(year, month, day, hour, minute, second, fraction, tzinfo=zone)
    except ValueError:
        return None


def _date(text: str) -> datetime.date | None:
    match = _DATE.fullmatch(text)
    if match is None:
        return None
    try:
        return datetime.date(*(int(g) for g in match.groups()))
    except ValueError:
        return None


def infer_value_type(raw: str, zone: datetime.tzinfo) -> DataType:
    """The type Spark gives one partition value on its own (``inferPartitionColumnValue``)."""
    if _INT.fullmatch(raw):
        number = int(raw)
        if _INT_RANGE[0] <= number <= _INT_RANGE[1]:
            return IntegerType()
        if _LONG_RANGE[0] <= number <= _LONG_RANGE[1]:
            return LongType()
    integral = _integral_decimal(raw)
    if integral is not None:
        return DecimalType(_digits(integral), 0)
    if _java_double(raw) is not None:
        return DoubleType()
    if _timestamp(unescape_path_name(raw), zone) is not None:
        return TimestampType()
    if _date(raw) is not None:
        return DateType()
    if raw == HIVE_DEFAULT_PARTITION:
        return NullType()
    return StringType()


# -- a column's type -----------------------------------------------------------------------
def _as_decimal(data_type: DataType) -> DecimalType:
    if isinstance(data_type, DecimalType):
        return data_type
    return DecimalType(10 if isinstance(data_type, IntegerType) else 20, 0)


def wider_type(left: DataType, right: DataType) -> DataType:
    """Spark's ``findWiderTypeForPartitionColumn`` of two value types."""
    if left == right:
        return left
    if isinstance(left, NullType):
        return right
    if isinstance(right, NullType):
        return left
    kinds = {type(left), type(right)}
    if DoubleType in kinds and kinds & {LongType, DecimalType}:
        return StringType()
    if kinds == {IntegerType, LongType}:
        return LongType()
    if kinds == {IntegerType, DoubleType}:
        return DoubleType()
    if kinds <= {IntegerType, LongType, DecimalType}:
        a, b = _as_decimal(left), _as_decimal(right)
        scale = max(a.scale, b.scale)
        digits = max(a.precision - a.scale, b.precision - b.scale)
        return DecimalType(min(digits + scale, MAX_DECIMAL_DIGITS), scale)
    if kinds == {DateType, TimestampType}:
        return TimestampType()
    return StringType()


def infer_column_type(raws: Sequence[str], zone: datetime.tzinfo, infer: bool = True) -> DataType:
    """The type of a partition column with these raw values (``infer=False``: Spark's
    ``spark.sql.sources.partitionColumnTypeInference.enabled=false``, strings)."""
    if not infer:
        types: list[DataType] = [NullType() if r == HIVE_DEFAULT_PARTITION else StringType() for r in raws]
    else:
        types = [infer_value_type(r, zone) for r in raws]
    start: DataType = NullType()
    return reduce(wider_type, types, start)


# -- a value as its column's type ------------------------------------------------------------
def cast_value(raw: str, data_type: DataType, zone: datetime.tzinfo) -> Any:
    """A raw directory value as ``data_type`` (Spark's ``castPartValueToDesiredType``).

    Raises ValueError when the text is not a value of that type (a user-given schema
    that does not fit the directories).
    """
    if raw == HIVE_DEFAULT_PARTITION or isinstance(data_type, NullType):
        return None
    if isinstance(data_type, StringType):
        return unescape_path_name(raw)
    if isinstance(data_type, (ByteType, ShortType, IntegerType, LongType)):
        if not _INT.fullmatch(raw):
            raise ValueError(f"{raw!r} is not an integer")
        return int(raw)
    if isinstance(data_type, (FloatType, DoubleType)):
        number = _java_double(raw)
        if number is None:
            raise ValueError(f"{raw!r} is not a number")
        return number
    if isinstance(data_type, DecimalType):
        if not _BIG_DECIMAL.fullmatch(raw):
            raise ValueError(f"{raw!r} is not a decimal number")
        return decimal.Decimal(raw).quantize(decimal.Decimal(1).scaleb(-data_type.scale),
                                             context=decimal.Context(prec=1000))
    if isinstance(data_type, DateType):
        day = _date(raw)
        if day is None:
            raise ValueError(f"{raw!r} is not a date (yyyy-MM-dd)")
        return day
    if isinstance(data_type, (TimestampType, TimestampNTZType)):
        return _cast_timestamp(raw, data_type, zone)
    if isinstance(data_type, BooleanType):
        if raw.lower() not in ("true", "false"):
            raise ValueError(f"{raw!r} is not true or false")
        return raw.lower() == "true"
    raise ValueError(f"partition columns of type {data_type.simpleString()} are not supported")


def _cast_timestamp(raw: str, data_type: DataType, zone: datetime.tzinfo) -> datetime.datetime:
    """A timestamp, or a date's midnight, in the session time zone (naive for timestamp_ntz)."""
    text = unescape_path_name(raw)
    match = re.fullmatch(r"([0-9]{4}-[0-9]{2}-[0-9]{2})(?:[ T]([0-9]{2}):([0-9]{2})(?::([0-9]{2})"
                         r"(?:\.([0-9]{1,6})[0-9]*)?)?)?", text)
    day = _date(match[1]) if match else None
    if match is None or day is None:
        raise ValueError(f"{raw!r} is not a timestamp (yyyy-MM-dd HH:mm:ss)")
    hour, minute, second = (int(match[n] or 0) for n in (2, 3, 4))
    micros = int((match[5] or "0").ljust(6, "0"))
    try:
        value = datetime.datetime(day.year, day.month, day.day, hour, minute, second, micros)
    except ValueError:
        raise ValueError(f"{raw!r} is not a timestamp (yyyy-MM-dd HH:mm:ss)") from None
    return value if isinstance(data_type, TimestampNTZType) else value.replace(tzinfo=zone)


def session_zone(name: str | None) -> datetime.tzinfo:
    """The tzinfo of Spark's ``spark.sql.session.timeZone`` (a region or a fixed offset),
    or this process's local zone when unknown (the JVM's default, Spark's default too)."""
    if not name:
        local = datetime.datetime.now().astimezone().tzinfo
        assert local is not None
        return local
    offset = re.fullmatch(r"(?:UTC|GMT)?([+-])(\d{1,2})(?::?(\d{2}))?", name)
    if name in ("UTC", "GMT", "Z"):
        return datetime.timezone.utc
    if offset:
        delta = datetime.timedelta(hours=int(offset[2]), minutes=int(offset[3] or 0))
        return datetime.timezone(-delta if offset[1] == "-" else delta)
    try:
        return ZoneInfo(name)
    except (KeyError, ValueError) as error:
        raise OptionError(f"unknown session time zone {name!r} (spark.sql.session.timeZone): "
                          f"{error}") from None


@dataclass(frozen=True)
class PartitionColumn:
    """A partition column: its name and the type Spark gives it."""

    name: str
    data_type: DataType


def discover(relative_dirs: Sequence[str], zone: datetime.tzinfo, infer: bool = True,
             given: dict[str, DataType] | None = None) -> tuple[list[PartitionColumn], list[tuple[Any, ...]]]:
    """The partition columns of files in these directories, and each file's values.

    Every file must name the same columns in the same order (Spark refuses a table whose
    files do not: "Conflicting directory structures detected"). ``given`` types override
    inference (a user-given schema); a value that does not fit raises OptionError.
    """
    parsed = [parse_partition_path(d) for d in relative_dirs]
    if not parsed:
        return [], []
    names = [name for name, _ in parsed[0]]
    for directory, pairs in zip(relative_dirs, parsed, strict=True):
        if [name for name, _ in pairs] != names:
            raise OptionError(
                f"conflicting partition directories: {relative_dirs[0]!r} names columns "
                f"{names}, {directory!r} names {[n for n, _ in pairs]} (every file of a table "
                "must be under the same column=value directories)")
    columns = []
    for position, name in enumerate(names):
        raws = [values[position][1] for values in parsed]
        data_type = (given or {}).get(name) or infer_column_type(raws, zone, infer)
        columns.append(PartitionColumn(name, data_type))
    rows = []
    for directory, values in zip(relative_dirs, parsed, strict=True):
        row = []
        for column, (_, raw) in zip(columns, values, strict=True):
            try:
                row.append(cast_value(raw, column.data_type, zone))
            except ValueError as error:
                raise OptionError(f"partition directory {directory!r}: column {column.name!r} is "
                                  f"{column.data_type.simpleString()}, but {error}") from None
        rows.append(tuple(row))
    return columns, rows
