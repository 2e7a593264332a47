"""What a job commit completes: the pendingsets of its committed task attempts, validated.

From the task messages when the engine passes them (exactly those attempts; a big
task's message carries a digest-checked reference instead of its entries), else found
in the job's directory, one attempt per task (:mod:`.claims`).

Job commit reads them twice, never holding them all: a first pass fetches (a few in
parallel), validates every entry and checks that no two uploads share a destination;
what it keeps of a fetched pendingset is its bytes, compressed (:class:`JobCommits`).
The passes that act (complete, list the files) read them again one at a time (unchecked:
the bytes are those the first pass validated). A job of
100,000 files holds a few MB, not one object per upload.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from outcommit.context import JobContext
from outcommit.errors import CommitError, CorruptFileError
from outcommit.parallel import outcomes

from . import claims
from .files import Expectations, PendingCommit, PendingSet, commit_of, digest, parse_pendingset
from .layout import JobLayout

#: Pendingsets fetched and parsed at once in the first pass (their entries are the memory).
LOAD_THREADS = 8


@dataclass
class Loaded:
    """One committed pendingset between the passes: counts, and its entries or bytes."""

    task_id: str
    attempt_id: str
    where: str
    files: int
    length: int
    inline: PendingSet | None = None   # carried by the message (already in the driver's memory)
    packed: bytes = b""                 # fetched: its bytes, zlib-compressed

    def commits(self) -> list[PendingCommit]:
        """Its entries again: the first pass validated these very bytes (kept in memory,
        compressed), so they are read, not checked again."""
        if self.inline is not None:
            return self.inline.commits
        return [commit_of(entry) for entry in json.loads(zlib.decompress(self.packed))["commits"]]


def _loaded(pendingset: PendingSet, where: str, data: bytes | None) -> Loaded:
    return Loaded(task_id=pendingset.task_id, attempt_id=pendingset.attempt_id, where=where,
                  files=len(pendingset.commits), length=pendingset.length,
                  inline=pendingset if data is None else None,
                  packed=zlib.compress(data, 1) if data is not None else b"")


class JobCommits(Collection[PendingCommit]):
    """Every upload of a job's pendingsets, streamed: iterate as often as needed, in order."""

    def __init__(self, loaded: Sequence[Loaded], expect: Expectations) -> None:
        self.loaded = list(loaded)
        self.expect = expect

    def __iter__(self) -> Iterator[PendingCommit]:
        for item in self.loaded:
            yield from item.commits()

    def __len__(self) -> int:
        return sum(item.files for item in self.loaded)

    def __contains__(self, value: object) -> bool:
        return any(commit == value for commit in self)

    @property
    def tasks(self) -> int:
        return len(self.loaded)

    @property
    def length(self) -> int:
        return sum(item.length for item in self.loaded)


class UniqueDestinations:
    """Two uploads to one key: one would silently replace the other (16-byte digests kept)."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.seen: set[bytes] = set()

    def add(self, commits: Iterable[PendingCommit],
            check: Callable[[PendingCommit], None] | None = None) -> None:
        """Record ``commits`` (each first passed to ``check``, which may raise)."""
        for commit in commits:
            if check is not None:
                check(commit)
            key = hashlib.blake2b(commit.path.encode("utf-8"), digest_size=16).digest()
            if key in self.seen:
                raise CorruptFileError(self.where, "destinationKey",
                                       f"{commit.key!r} is the destination of two uploads "
                                       f"({commit.upload_id} and another)")
            self.seen.add(key)

#: A pendingset this large is refused unread (a task of ~100k files is ~40 MB).
MAX_PENDINGSET_BYTES = 64 << 20


def parse_bytes(data: bytes, where: str, expect: Expectations) -> PendingSet:
    try:
        parsed = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise CorruptFileError(where, None, f"not valid JSON: {exc}") from None
    return parse_pendingset(parsed, where, expect)


def from_messages(layout: JobLayout, job: JobContext, messages: Sequence[Mapping[str, Any]],
                  expect: Expectations, threads: int,
                  check: Callable[[PendingCommit], None] | None = None) -> JobCommits:
    """The pendingsets the task messages name, one per task (a task given twice is refused).

    Messages carry their commits, or (big tasks) a reference: those pendingsets are fetched
    in parallel, a bounded number at a time, validated, and kept compressed.
    """
    def load(item: tuple[int, Mapping[str, Any]]) -> tuple[PendingSet, str, bytes | None]:
        index, message = item
        where = f"task commit message #{index}"
        if not isinstance(message, Mapping):
            raise CorruptFileError(where, None, "is not a mapping")
        if not isinstance(message.get("taskAttemptId"), str):
            raise CorruptFileError(where, "taskAttemptId", "is missing")
        if "commits" in message:
            return parse_pendingset(message, where, expect), where, None
        data, url = referenced_bytes(layout, job, message, where)
        return parse_bytes(data, url, expect), url, data

    found: list[Loaded] = []
    tasks: dict[str, str] = {}
    unique = UniqueDestinations("pendingsets of the job")
    for index, (pendingset, where, data) in enumerate(
            _in_order(load, enumerate(messages), min(threads, LOAD_THREADS), "outcommit-load")):
        attempt_id = str(messages[index].get("taskAttemptId"))
        if pendingset.task_id in tasks:
            raise CorruptFileError(f"task commit message #{index}", "taskId",
                                   f"task {pendingset.task_id} was given twice "
                                   f"({tasks[pendingset.task_id]} and {attempt_id})")
        tasks[pendingset.task_id] = attempt_id
        unique.add(pendingset.commits, check)
        found.append(_loaded(pendingset, where, data))
    return JobCommits(found, expect)


def _in_order(fn: Any, items: Iterable[Any], threads: int, name: str) -> Iterator[Any]:
    """``fn`` over ``items`` a few at a time, results in order; the first error is raised."""
    stream = outcomes(fn, items, threads, name)
    try:
        for outcome in stream:
            if outcome.error is not None:
                raise outcome.error
            yield outcome.result
    finally:
        stream.close()


def referenced(layout: JobLayout, job: JobContext, message: Mapping[str, Any], where: str,
               expect: Expectations) -> PendingSet:
    """The pendingset a message refers to, checked against the message's digest."""
    data, url = referenced_bytes(layout, job, message, where)
    return parse_bytes(data, url, expect)


def referenced_bytes(layout: JobLayout, job: JobContext, message: Mapping[str, Any],
                     where: str) -> tuple[bytes, str]:
    """The bytes (and URL) of the pendingset a message refers to, checked against its digest."""
    task_id, attempt_id = message.get("taskId"), message.get("taskAttemptId")
    if not isinstance(task_id, str) or "/" in task_id or not task_id.startswith("task_"):
        raise CorruptFileError(where, "taskId", f"invalid task id {task_id!r}")
    if not isinstance(attempt_id, str) or "/" in attempt_id or not attempt_id.startswith("attempt_"):
        raise CorruptFileError(where, "taskAttemptId", f"invalid attempt id {attempt_id!r}")
    # The path is ours, never the message's: a message cannot point outside the job.
    path = layout.pendingset(job, task_id, attempt_id)
    meta = layout.meta
    try:
        data = meta.read_bytes(path)
    except FileNotFoundError:
        raise CommitError(f"{where}: the pendingset {meta.url(path)} is missing") from None
    if digest(data) != message.get("sha256"):
        raise CorruptFileError(meta.url(path), "sha256",
                               "does not match the task commit message (changed after task commit)")
    return data, meta.url(path)


def discover(layout: JobLayout, job: JobContext, expect: Expectations, threads: int,
             check: Callable[[PendingCommit], None] | None = None) -> JobCommits:
    """One committed pendingset per task found in the job attempt's directory."""
    meta = layout.meta
    task_dirs = [e.path for e in meta.list_dir(layout.pendingsets_dir(job)) if e.is_dir]

    def load(task_dir: str) -> tuple[PendingSet, str, bytes] | None:
        chosen = claims.choose(meta, task_dir)
        if chosen is None:
            return None
        data = meta.read_bytes(chosen)
        if len(data) > MAX_PENDINGSET_BYTES:
            raise CorruptFileError(meta.url(chosen), None, f"larger than {MAX_PENDINGSET_BYTES} bytes")
        return parse_bytes(data, meta.url(chosen), expect), meta.url(chosen), data

    found: list[Loaded] = []
    unique = UniqueDestinations("pendingsets of the job")
    for result in _in_order(load, task_dirs, min(threads, LOAD_THREADS), "outcommit-discover"):
        if result is not None:
            pendingset, where, data = result
            unique.add(pendingset.commits, check)
            found.append(_loaded(pendingset, where, data))
    return JobCommits(found, expect)
