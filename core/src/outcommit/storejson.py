"""The JSON files committers keep (manifests, pendingsets, markers): written as UTF-8,
read with a size limit, and anything unreadable reported as corruption of that file."""

from __future__ import annotations

import json
from typing import Any

from .errors import CorruptFileError


def encode_json(data: Any) -> bytes:
    return json.dumps(data, indent=2, sort_keys=False).encode("utf-8")


def decode_json(data: bytes, url: str, max_bytes: int) -> Any:
    """The value in ``data`` (read from ``url``); CorruptFileError naming ``url`` when it is
    larger than ``max_bytes`` or no JSON."""
    if len(data) > max_bytes:
        raise CorruptFileError(url, None, f"larger than {max_bytes} bytes")
    try:
        return json.loads(data.decode("utf-8"))
    # RecursionError: absurdly nested JSON (garbage or hostile) is corruption too.
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise CorruptFileError(url, None, f"not valid JSON: {exc}") from None
