"""What Spark's file source reads at a streaming destination, by Spark's own algorithm.

``CompactibleFileStreamLog.allFiles`` as Spark 4.x runs it (``FileStreamSink.hasMetadata``,
``MetadataLogFileIndex``): the compaction interval derived from the ``.compact`` files'
names (two of them: their distance; one: ``deriveCompactInterval`` with Spark's default
10; none: 10), the newest batch whose file exists, then every batch from the compaction
before it; a missing one is an error in Spark (``... doesn't exist``), and an assertion
error here. The real-Spark tests (``test_spark_reads_the_sink.py``) check the same
destinations with Spark itself.
"""

from __future__ import annotations

import json
import re
from urllib.parse import unquote

from outcommit.store import Store

SPARK_DEFAULT_INTERVAL = 10
_NAME = re.compile(r"^(\d+)(\.compact)?$")


def derive_interval(default: int, latest_compact: int) -> int:
    """Spark's ``CompactibleFileStreamLog.deriveCompactInterval``."""
    n = latest_compact + 1
    if n <= default:
        return n
    if default < n // 2:
        return next((i for i in range(default, n // 2 + 1) if n % i == 0), n)
    return n


def spark_view(store: Store, dest: str, default: int = SPARK_DEFAULT_INTERVAL) -> list[str] | None:
    """Destination-relative paths Spark reads at ``dest``; None without ``_spark_metadata``
    (Spark then lists the directory)."""
    meta = store.join(dest, "_spark_metadata")
    listing = store.list_dir(meta)
    if not listing:
        return None
    names = {i.name for i in listing if not i.is_dir and _NAME.match(i.name)}
    ids = sorted({int(_NAME.match(n).group(1)) for n in names}, reverse=True)  # type: ignore[union-attr]
    compacts = sorted((int(n.split(".")[0]) for n in names if n.endswith(".compact")), reverse=True)
    interval = (compacts[0] - compacts[1] if len(compacts) >= 2 else
                derive_interval(default, compacts[0]) if compacts else default)

    def name(batch: int) -> str:
        return f"{batch}.compact" if (batch + 1) % interval == 0 else str(batch)

    latest = next((b for b in ids if name(b) in names), None)
    if latest is None:
        return []
    start = max(0, (latest + 1) // interval * interval - 1)
    paths: list[str] = []
    for batch in range(start, latest + 1):
        assert name(batch) in names, f"Spark fails: {meta}/{name(batch)} doesn't exist (latest {latest})"
        lines = store.read_bytes(store.join(meta, name(batch))).decode("utf-8").split("\n")
        assert lines[0] == "v1", f"{name(batch)}: first line {lines[0]!r}"
        for line in lines[1:]:
            status = json.loads(line)
            assert status["action"] == "add" and status["isDir"] is False, status
            paths.append(relative(store, dest, status["path"]))
    return sorted(paths)


def relative(store: Store, dest: str, uri: str) -> str:
    """A SinkFileStatus path (``file:/abs/...``, ``s3://bucket/...``) relative to ``dest``."""
    if uri.startswith("file:"):
        path = unquote(uri.removeprefix("file://"))
        assert path.startswith("/"), f"not an absolute local URI: {uri}"
    else:
        path = store.strip(unquote(uri))
    base = dest.rstrip("/") + "/"
    assert path.startswith(base), f"{uri} is outside {dest}"
    return path[len(base):]
