"""Path rules every committer applies to store paths: hidden names, containment, and the
names of Hive partition directories."""

from __future__ import annotations

import posixpath
import re
from typing import Any
from urllib.parse import quote

from .errors import ContainmentError


def is_hidden(name: str) -> bool:
    """Hadoop's rule: names starting with '_' or '.' are not data."""
    return name.startswith(("_", "."))


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


def escape_partition_value(value: Any) -> str:
    """Hive's and Spark's escaping (``ExternalCatalogUtils.escapePathName``): ``%XX`` for
    the ASCII characters in :data:`_ESCAPED` only, every other character as it is.

    Spark reads each ``%XX`` back as the one character XX, so a UTF-8 byte escape of a
    non-ASCII character (``Z%C3%BCrich``) would read back as ``ZÃ¼rich``; pyarrow reads
    both forms. A value can never introduce a path separator, ``.`` or ``..``.
    """
    if value is None:
        return HIVE_DEFAULT_PARTITION
    text = value.isoformat() if hasattr(value, "isoformat") else str(value)
    if text == "":
        return HIVE_DEFAULT_PARTITION
    if text in (".", ".."):
        return text.replace(".", "%2E")
    return text.translate(_ESCAPES)


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
