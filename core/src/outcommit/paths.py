"""Path rules every committer applies to store paths: hidden names, containment, and the
names of Hive partition directories."""

from __future__ import annotations

import datetime
import decimal
import math
import posixpath
import re
import struct
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from .errors import ContainmentError


def is_hidden(name: str) -> bool:
    """Hadoop's rule: names starting with '_' or '.' are not data."""
    return name.startswith(("_", "."))


def hidden_from_readers(relative_path: str) -> bool:
    """Whether a reader following Spark's rule skips this path (relative to the destination).

    Spark's ``InMemoryFileIndex.shouldFilterOutPathName``, applied to every component:
    names starting with ``.``, or with ``_`` unless they hold ``=`` (a partition such as
    ``_year=2026``), or ending in ``._COPYING_``; Parquet's ``_metadata`` and
    ``_common_metadata`` summaries are kept. What readers see is the data conflict modes
    refuse (``fail``) or delete (``replace``); the rest (``_temporary``, other jobs'
    ``__magic_job-...``) is left alone.
    """
    for name in relative_path.strip("/").split("/"):
        excluded = ((name.startswith("_") and "=" not in name) or name.startswith(".")
                    or name.endswith("._COPYING_"))
        if excluded and not name.startswith(("_common_metadata", "_metadata")):
            return True
    return False


def relative_to(path: str, root: str) -> str:
    """``path`` relative to ``root``; raises ContainmentError if it is not inside."""
    root = root.rstrip("/")
    norm = posixpath.normpath(path)
    if norm != path.rstrip("/") or not norm.startswith(root + "/"):
        raise ContainmentError(f"{path} is not inside {root}")
    return norm[len(root) + 1:]


def is_inside(path: str, root: str) -> bool:
    try:
        relative_to(path, root)
    except ContainmentError:
        return False
    return True


HIVE_DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
#: What Spark escapes in a partition directory's value (control characters, DEL, and
#: ``"#%'*/:=?\\{[]^``), and NUL, which no path may hold.
_ESCAPED = "".join(chr(c) for c in range(0x20)) + "\x7f" + "\"#%'*/:=?\\{[]^"
_ESCAPES = {ord(c): f"%{ord(c):02X}" for c in _ESCAPED}
#: What releases before 2026-11-26 left unescaped (``urllib.parse.quote``'s ``safe``): they
#: escaped every other character as UTF-8 bytes (``Z%C3%BCrich``).
_EARLIER_SAFE = " -_.~:,;@+!$()'"
_PERCENT = re.compile(r"%([0-9A-Fa-f]{2})")


def escape_partition_value(value: Any, single: bool = False) -> str:
    """A partition directory's value as Spark's own writer names it: the value as Spark
    casts it to a string (:func:`partition_text`), escaped as Spark escapes it
    (``ExternalCatalogUtils.escapePathName``): ``%XX`` for the ASCII characters in
    :data:`_ESCAPED` only, every other character as it is. ``single``: a 32-bit float.

    Spark reads each ``%XX`` back as the one character XX, so a UTF-8 byte escape of a
    non-ASCII character (``Z%C3%BCrich``) would read back as ``ZÃ¼rich``; pyarrow reads
    both forms. A value can never introduce a path separator, ``.`` or ``..``.
    """
    if value is None:
        return HIVE_DEFAULT_PARTITION
    text = partition_text(value, single)
    if text == "":
        return HIVE_DEFAULT_PARTITION
    if text in (".", ".."):
        return text.replace(".", "%2E")
    return text.translate(_ESCAPES)


def partition_text(value: Any, single: bool = False) -> str:
    """``value`` as Spark casts it to a string for a partition directory: ``true``/``false``;
    doubles as Java's ``Double.toString`` (``1.5``, ``1.0E10``, ``NaN``, ``Infinity``);
    timestamps ``2026-11-01 10:30:00.25`` (the wall time in the value's own time zone, as
    Spark renders one in its session time zone, which its Arrow batches carry); dates ISO."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return _java_float(value, single)
    if isinstance(value, datetime.datetime):
        text = (f"{value.year:04d}-{value.month:02d}-{value.day:02d} "
                f"{value.hour:02d}:{value.minute:02d}:{value.second:02d}")
        # pandas Timestamps (pyarrow's timestamp[ns] values) carry nanoseconds; Spark has none.
        nanos = value.microsecond * 1000 + int(getattr(value, "nanosecond", 0))
        if nanos:
            text += f".{nanos:09d}".rstrip("0")
        return text
    if isinstance(value, datetime.date):
        return f"{value.year:04d}-{value.month:02d}-{value.day:02d}"
    return str(value)


def _java_float(value: float, single: bool) -> str:
    """Java's ``Double.toString`` (``Float.toString`` when ``single``): the shortest digits
    that read back as the value, in decimal for 10^-3 <= |v| < 10^7, else ``d.dddE<n>``."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    if single:  # the fewest significant digits that read back as the same 32-bit float
        target = _float32(value)
        digits = next(text for precision in range(1, 10)
                      if _float32(float(text := f"{value:.{precision}g}")) == target)
    else:
        digits = repr(value)
    number = decimal.Decimal(digits).normalize()
    sign, figures, exponent = number.as_tuple()
    assert isinstance(exponent, int)
    scientific = len(figures) - 1 + exponent  # the exponent of the first digit
    mantissa = "".join(map(str, figures))
    if -3 <= scientific < 7:
        if exponent >= 0:
            text = mantissa + "0" * exponent + ".0"
        elif scientific >= 0:
            text = mantissa[:scientific + 1] + "." + mantissa[scientific + 1:]
        else:
            text = "0." + "0" * (-scientific - 1) + mantissa
    else:
        text = f"{mantissa[0]}.{mantissa[1:] or '0'}E{scientific}"
    return ("-" if sign else "") + text


def earlier_partition_dir(relative: str) -> str | None:
    """The name the same partition directory (``col=value/...``, as
    :func:`escape_partition_value` names it) had when written by a release before
    2026-11-26, or None when it is the same: conflict modes scoped to partitions must find
    a partition under either name, or a ``replace`` would leave its old rows beside the
    new ones."""
    parts = []
    for part in relative.split("/"):
        column, equals, value = part.partition("=")
        if equals and value != HIVE_DEFAULT_PARTITION and value not in ("%2E", "%2E%2E"):
            value = quote(_PERCENT.sub(lambda m: chr(int(m.group(1), 16)), value), safe=_EARLIER_SAFE)
        parts.append(f"{column}{equals}{value}")
    earlier = "/".join(parts)
    return None if earlier == relative else earlier


def _float32(value: float) -> float:
    """``value`` rounded to a 32-bit float."""
    return float(struct.unpack("f", struct.pack("f", value))[0])


def characters_not_allowed(name: str, allowed: Callable[[str], object]) -> str | None:
    """Why ``name`` breaks a store's character rule for bucket or container names (``allowed``:
    a predicate of one character), as the stores' refusals say it, or None when it does not."""
    bad = sorted({c for c in name if not allowed(c)})
    if not bad:
        return None
    kinds = (["uppercase letters"] if any(c.isupper() for c in bad) else []) + \
        [repr(c) for c in bad if not c.isupper()]
    return f"{' and '.join(kinds)} {'is' if kinds == [repr(bad[0])] else 'are'} not allowed"
