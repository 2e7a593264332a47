"""Spark's own log of a streaming destination, ``_spark_metadata/``, kept from the batch log.

Spark's file source reads a directory that holds ``_spark_metadata/`` through that log
only (``FileStreamSink.hasMetadata`` -> ``MetadataLogFileIndex``): ``spark.read.parquet(dest)``
and ``spark.readStream.parquet(dest)`` then see exactly the files it names, as for the
output of Spark's own file sink. Without it they see every data file under the destination,
an interrupted batch's too. The format is Spark's ``FileStreamSinkLog`` (version 1)::

    <dest>/_spark_metadata/0           "v1", then one JSON line per file of batch 0
    <dest>/_spark_metadata/9.compact   every compactInterval-th batch: the files of 0..9

each line a ``SinkFileStatus``: ``{"path": <absolute URI>, "size", "isDir": false,
"modificationTime", "blockReplication", "blockSize", "action": "add"}``.

outcommit's batch log stays the authority. A batch's file here is written only after its
entry there exists, from that entry (never from what a run believes it committed: a run
fenced off by a rollback has no entry to copy), created exclusively; its content is a
function of the log alone, so a replay or a second run writes the same bytes and finds
its own file. Spark's reader needs every batch from the newest compaction to the newest
batch: a batch whose file is missing (the driver died between the entry and the file) is
written by the next commit or replay, before any later batch's file.
"""

from __future__ import annotations

import json
import logging
import posixpath
import re
from collections.abc import Callable, Mapping, Sequence
from urllib.parse import quote

from ..store import Store
from .log import BatchLogError
from .records import BatchEntry

log = logging.getLogger("outcommit.streaming")

SPARK_METADATA_DIR = "_spark_metadata"
#: ``FileStreamSinkLog.VERSION``: the first line of every file.
VERSION_LINE = "v1"
#: What Hadoop reports for a local file and for S3A's default block (Spark copies it).
BLOCK_SIZE = 32 * 1024 * 1024
_NAME = re.compile(r"^(\d{1,19})(\.compact)?$")
#: Characters Java's ``URI`` leaves as they are in a path (Hadoop's ``Path.toUri``).
_URI_SAFE = "/@!$&'()*+,;=:"


class SparkMetadataError(BatchLogError):
    """``_spark_metadata/`` holds a file this destination's batch log did not make."""


def spark_uri(store: Store, path: str, destination: str | None = None, dest: str = "") -> str:
    """The URI Spark resolves for a store path: percent-encoded as Hadoop's ``Path.toUri``
    encodes it (a partition value's ``%3A`` is a name, not an escape). On local disks
    ``file:///abs/path``, as Spark 4's own file sink writes it for a ``file://`` path.

    With ``destination`` (the URL as the user gave it) and ``dest`` (its store path): the
    destination's scheme and authority, then its path and ``path`` relative to ``dest``. A
    store's own URL may drop part of the authority (Azure's ``@account.host``): Spark could
    not resolve ``abfss://container/out/part-0``."""
    scheme, _, rest = (destination or "").partition("://")
    # Read literally, as the stores read a destination (a '#' or '?' is part of a name).
    authority, _, dest_path = rest.partition("/")
    if not authority or scheme in ("", "file", "memory"):
        return store.url(quote(path, safe=_URI_SAFE))
    relative = posixpath.relpath(path, dest) if dest else "."
    full = posixpath.normpath(posixpath.join("/" + dest_path, relative))
    return f"{scheme}://{authority}{quote(full, safe=_URI_SAFE)}"


class SparkMetadata:
    """``<dest>/_spark_metadata`` of one destination, with the batch log's compaction interval."""

    def __init__(self, store: Store, dest: str, compact_interval: int,
                 destination: str | None = None) -> None:
        self.store = store
        self.dest = dest
        #: The destination's URL as the user gave it: the authority of the files' URIs.
        self.destination = destination
        self.dir = store.join(dest, SPARK_METADATA_DIR)
        self.compact_interval = compact_interval

    # -- names --------------------------------------------------------------------------
    def is_compaction_batch(self, batch_id: int) -> bool:
        return (batch_id + 1) % self.compact_interval == 0

    def name(self, batch_id: int) -> str:
        return f"{batch_id}.compact" if self.is_compaction_batch(batch_id) else str(batch_id)

    def path(self, batch_id: int) -> str:
        return self.store.join(self.dir, self.name(batch_id))

    def listing(self) -> dict[int, str]:
        """Batch id -> file name, of the batch files there now (Spark's own temporary and
        checksum files, and ours, are not batch files)."""
        found: dict[int, str] = {}
        for info in self.store.list_dir(self.dir):
            match = _NAME.match(info.name)
            if match and not info.is_dir:
                found[int(match.group(1))] = info.name
        return found

    def needed(self, batch_id: int) -> list[int]:
        """The batches Spark's reader reads when ``batch_id`` is the newest (its
        ``getAllValidBatches``), and the compaction before (with two compactions Spark
        derives the interval from their names, whatever its own default is)."""
        k = self.compact_interval
        start = max(0, (batch_id + 1) // k * k - 1)
        earlier = [start - k] if self.is_compaction_batch(start) and start - k >= 0 else []
        return [*earlier, *range(start, batch_id + 1)]

    # -- content ------------------------------------------------------------------------
    def render(self, entries: Sequence[BatchEntry]) -> bytes:
        """The file of the last of ``entries`` (a compaction: of all of them)."""
        lines = [VERSION_LINE]
        for entry in entries:
            when = int(entry.committed_at * 1000)  # the batch's commit made its files visible
            for file in entry.files:
                uri = spark_uri(self.store, self.store.join(self.dest, file.path),
                                self.destination, self.dest)
                lines.append(json.dumps({"path": uri, "size": file.size, "isDir": False,
                                         "modificationTime": when, "blockReplication": 1,
                                         "blockSize": BLOCK_SIZE, "action": "add"},
                                        separators=(",", ":")))
        return "\n".join(lines).encode("utf-8")

    def _paths(self, data: bytes, where: str) -> set[str]:
        lines = data.decode("utf-8", errors="replace").split("\n")
        if lines[0].strip() != VERSION_LINE:
            raise SparkMetadataError(f"{where} is not a Spark file sink log of version 1 "
                                     f"(first line {lines[0][:40]!r})")
        paths = set()
        for line in lines[1:]:
            if line.strip():
                try:
                    paths.add(str(json.loads(line)["path"]))
                except (ValueError, KeyError, TypeError):
                    raise SparkMetadataError(
                        f"{where}: a line is not a SinkFileStatus: {line[:80]!r}") from None
        return paths

    # -- writing --------------------------------------------------------------------------
    def check_free(self, batch_id: int, logged: Callable[[int], bool]) -> dict[int, str]:
        """Before batch ``batch_id`` is committed: refuse if Spark's log has it, or a later
        batch, and the batch log does not (``logged(b)``: another run may have committed it
        meanwhile; its commit then fails as it did before). Another writer — Spark's file
        sink, say — keeps Spark's log here: Spark's readers read its newest batch, and would
        show the other writer's files, not ours. The listing, for :meth:`sync` after the commit."""
        listing = self.listing()
        top = max(listing, default=-1)
        for other in dict.fromkeys(b for b in (batch_id, top) if b >= batch_id and b in listing):
            if not logged(other):
                raise SparkMetadataError(
                    f"{self.store.url(self.store.join(self.dir, listing[other]))} exists, and batch "
                    f"{other} is not in outcommit's batch log: another writer (Spark's file sink?) "
                    "keeps Spark's log in this destination; write this query to its own destination "
                    "(nothing was written)")
        return listing

    def sync(self, entry: BatchEntry, entries: Callable[[], Sequence[BatchEntry]],
             listing: Mapping[int, str] | None = None) -> list[int]:
        """Write the files Spark's reader needs through batch ``entry`` (the log's entry of
        it) that are missing, oldest first, ``entry``'s last. ``entries``: every committed
        batch (read only when another batch's file is missing, or at a compaction)."""
        present = self.listing() if listing is None else listing
        missing = [b for b in self.needed(entry.batch_id) if b not in present]
        if not missing:
            return []
        logged: dict[int, BatchEntry] = {entry.batch_id: entry}
        if missing != [entry.batch_id] or self.is_compaction_batch(entry.batch_id):
            logged.update((e.batch_id, e) for e in entries() if e.batch_id < entry.batch_id)
        first = min(logged)
        written = []
        for batch_id in missing:
            if batch_id not in logged and batch_id > first:
                # Not committed (an engine that skipped a batch id): nothing to name. Spark's
                # reader wants every batch id; it fails until that batch is committed.
                log.warning("batch %d of %s is not in the batch log: no %s file for it", batch_id,
                            self.store.url(self.dest), SPARK_METADATA_DIR)
                continue
            # Below the log's first batch (a query whose checkpoint began elsewhere starts at
            # batch n > 0) nothing was ever committed here: an empty file says so, and Spark's
            # reader needs one for every batch since the compaction before the newest.
            covered = [logged[b] for b in sorted(logged) if b <= batch_id] \
                if self.is_compaction_batch(batch_id) else [logged[b] for b in (batch_id,) if b in logged]
            self._create(batch_id, self.render(covered))
            written.append(batch_id)
        if written and self.is_compaction_batch(written[-1]):
            self.delete_compacted(written[-1])
        if written[:-1] or entry.batch_id not in written:
            log.info("wrote %s files of batches %s at %s (missing: the driver that committed them "
                     "stopped before)", SPARK_METADATA_DIR, written, self.store.url(self.dest))
        return written

    def _create(self, batch_id: int, data: bytes) -> None:
        """Create the batch's file exclusively; one there already must name the same files."""
        path = self.path(batch_id)
        try:
            exclusive = self.store.exclusive_create()
            if exclusive is not None:
                exclusive.create_exclusive(path, data)
                return
            if not self.store.exists(path):  # stores without create-if-absent: one query each
                self.store.write_atomic(path, data)
                return
        except FileExistsError:
            pass
        # A replay, a second run, or a client retrying a create whose response was lost.
        where = self.store.url(path)
        if self._paths(self.store.read_bytes(path), where) != self._paths(data, where):
            raise SparkMetadataError(
                f"{where} names other files than batch {batch_id} of outcommit's batch log: another "
                "writer (Spark's file sink?) keeps Spark's log in this destination; Spark's readers "
                "would not see what outcommit committed (nothing was deleted)")

    def delete_compacted(self, batch_id: int) -> None:
        """After compaction ``batch_id``: delete what the previous compaction covers, as the
        batch log does (the previous compaction stays: a reader that listed before has an
        interval to finish, and Spark derives the interval from two compactions)."""
        listing = self.listing()
        previous = [b for b in listing if b < batch_id and self.is_compaction_batch(b)]
        if not previous:
            return
        keep_from = max(previous)
        doomed = [self.store.join(self.dir, name) for b, name in listing.items() if b < keep_from]
        if not doomed:
            return
        try:
            self.store.delete_files(doomed)
        except Exception:  # a leftover file is harmless: Spark reads from the newest compaction
            log.warning("could not delete every compacted file under %s (%d)", self.store.url(self.dir),
                        len(doomed), exc_info=True)


__all__ = ["SPARK_METADATA_DIR", "SparkMetadata", "SparkMetadataError", "spark_uri"]
