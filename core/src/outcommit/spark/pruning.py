"""Partition pruning: which files a query's filters cannot skip.

Spark hands a Python data source the filters of a query (``DataSourceReader.pushFilters``,
with ``spark.sql.python.filterPushdown.enabled``). A filter on partition columns only is
decided per file, from its directory's values: a file whose values make the filter
false or null holds no row the query keeps, so it is never opened.

Pruning may only drop files Spark would filter out entirely: anything this module cannot
decide exactly (a data column, a nested field, NaN, values of types that do not compare)
keeps the file. The reader also hands every filter back to Spark, which evaluates it on
the rows read, so a kept file never adds a row.
"""

from __future__ import annotations

import datetime
import decimal
import math
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from enum import Enum
from typing import Any

from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringContains,
    StringEndsWith,
    StringStartsWith,
)


class Truth(Enum):
    """SQL's three values, and UNKNOWN: this module cannot tell."""

    TRUE = "true"
    FALSE = "false"
    NULL = "null"
    UNKNOWN = "unknown"


_COMPARE: dict[type[Filter], Callable[[Any, Any], Any]] = {
    GreaterThan: operator.gt, GreaterThanOrEqual: operator.ge,
    LessThan: operator.lt, LessThanOrEqual: operator.le,
}
_STRING: dict[type[Filter], Callable[[str, str], bool]] = {
    StringStartsWith: str.startswith, StringEndsWith: str.endswith, StringContains: str.__contains__,
}


def _truth(value: bool) -> Truth:
    return Truth.TRUE if value else Truth.FALSE


def _comparable(left: Any, right: Any) -> bool:
    """Whether Python compares these exactly as Spark does. Not: NaN (Spark orders it
    above every number and equal to itself), an integer beyond 2^53 against a double
    (Spark compares them as doubles), a decimal against a double, naive against aware
    timestamps, or values of different kinds."""
    if any(isinstance(v, float) and math.isnan(v) for v in (left, right)):
        return False
    if isinstance(left, bool) or isinstance(right, bool):
        return isinstance(left, bool) and isinstance(right, bool)
    kinds = {type(left), type(right)}
    if kinds == {int, float}:
        return all(abs(v) <= 2**53 for v in (left, right) if isinstance(v, int))
    if kinds == {int, decimal.Decimal}:
        return True
    if kinds == {datetime.datetime}:
        return (left.tzinfo is None) == (right.tzinfo is None)
    return len(kinds) == 1


def _equal(left: Any, right: Any) -> Truth:
    if not _comparable(left, right):
        return Truth.UNKNOWN
    try:
        return _truth(bool(left == right))
    except TypeError:
        return Truth.UNKNOWN


def evaluate(condition: Filter, values: Mapping[str, Any]) -> Truth:
    """``condition`` on a file whose partition columns have ``values``."""
    if isinstance(condition, Not):
        inner = evaluate(condition.child, values)
        return {Truth.TRUE: Truth.FALSE, Truth.FALSE: Truth.TRUE}.get(inner, inner)
    attribute: tuple[str, ...] = tuple(getattr(condition, "attribute", ()))
    if len(attribute) != 1 or attribute[0] not in values:
        return Truth.UNKNOWN  # a data column or a nested field: decided by the rows
    value = values[attribute[0]]
    operand: Any = getattr(condition, "value", None)
    if isinstance(condition, IsNull):
        return _truth(value is None)
    if isinstance(condition, IsNotNull):
        return _truth(value is not None)
    if isinstance(condition, EqualNullSafe):
        if value is None or operand is None:
            return _truth(value is None and operand is None)
        return _equal(value, operand)
    if value is None:
        return Truth.NULL
    if isinstance(condition, EqualTo):
        return Truth.NULL if operand is None else _equal(value, operand)
    if isinstance(condition, In):
        return _in(value, operand)
    compare = next((f for kind, f in _COMPARE.items() if isinstance(condition, kind)), None)
    if compare is not None:
        if operand is None:
            return Truth.NULL
        if not _comparable(value, operand):
            return Truth.UNKNOWN
        try:
            return _truth(bool(compare(value, operand)))
        except TypeError:
            return Truth.UNKNOWN
    test = next((f for kind, f in _STRING.items() if isinstance(condition, kind)), None)
    if test is not None and isinstance(value, str) and isinstance(operand, str):
        return _truth(test(value, operand))
    return Truth.UNKNOWN


def _in(value: Any, candidates: Iterable[Any]) -> Truth:
    """SQL's IN: true on a match; else null if a candidate is null; else false."""
    saw_null = False
    for candidate in candidates:
        if candidate is None:
            saw_null = True
            continue
        outcome = _equal(value, candidate)
        if outcome is Truth.TRUE:
            return Truth.TRUE
        if outcome is Truth.UNKNOWN:
            return Truth.UNKNOWN
    return Truth.NULL if saw_null else Truth.FALSE


def keeps(filters: Sequence[Filter], values: Mapping[str, Any]) -> bool:
    """Whether a file with these partition values may hold a row every filter keeps."""
    return all(evaluate(f, values) in (Truth.TRUE, Truth.UNKNOWN) for f in filters)
