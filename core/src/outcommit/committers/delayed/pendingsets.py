"""What a job commit completes: the pendingsets of its committed task attempts, validated.

From the task messages when the engine passes them (exactly those attempts; a big
task's message carries a digest-checked reference instead of its entries), else found
in the job's directory, one attempt per task (:mod:`.claims`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from outcommit.context import JobContext
from outcommit.errors import CommitError, CorruptFileError
from outcommit.parallel import run_all

from . import claims
from .files import Expectations, PendingSet, digest, parse_pendingset
from .layout import JobLayout

#: A pendingset this large is refused unread (a task of ~100k files is ~40 MB).
MAX_PENDINGSET_BYTES = 64 << 20


def parse_bytes(data: bytes, where: str, expect: Expectations) -> PendingSet:
    try:
        parsed = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise CorruptFileError(where, None, f"not valid JSON: {exc}") from None
    return parse_pendingset(parsed, where, expect)


def from_messages(layout: JobLayout, job: JobContext, messages: Sequence[Mapping[str, Any]],
                  expect: Expectations, threads: int) -> list[PendingSet]:
    """The pendingsets the task messages name, one per task (a task given twice is refused).

    Messages carry their commits, or (big tasks) a reference: those pendingsets are fetched
    in parallel, a bounded number at a time.
    """
    def load(item: tuple[int, Mapping[str, Any]]) -> PendingSet:
        index, message = item
        where = f"task commit message #{index}"
        if not isinstance(message, Mapping):
            raise CorruptFileError(where, None, "is not a mapping")
        if not isinstance(message.get("taskAttemptId"), str):
            raise CorruptFileError(where, "taskAttemptId", "is missing")
        if "commits" in message:
            return parse_pendingset(message, where, expect)
        return referenced(layout, job, message, where, expect)

    found: list[PendingSet] = []
    tasks: dict[str, str] = {}
    for index, pendingset in enumerate(run_all(load, enumerate(messages), threads, "outcommit-load")):
        where, attempt_id = f"task commit message #{index}", str(messages[index].get("taskAttemptId"))
        if pendingset.task_id in tasks:
            raise CorruptFileError(where, "taskId", f"task {pendingset.task_id} was given twice "
                                   f"({tasks[pendingset.task_id]} and {attempt_id})")
        tasks[pendingset.task_id] = attempt_id
        found.append(pendingset)
    return found


def referenced(layout: JobLayout, job: JobContext, message: Mapping[str, Any], where: str,
               expect: Expectations) -> PendingSet:
    """The pendingset a message refers to, checked against the message's digest."""
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
    return parse_bytes(data, meta.url(path), expect)


def discover(layout: JobLayout, job: JobContext, expect: Expectations, threads: int) -> list[PendingSet]:
    """One committed pendingset per task found in the job attempt's directory."""
    meta = layout.meta
    task_dirs = [e.path for e in meta.list_dir(layout.pendingsets_dir(job)) if e.is_dir]

    def load(task_dir: str) -> PendingSet | None:
        chosen = claims.choose(meta, task_dir)
        if chosen is None:
            return None
        return parse_pendingset(meta.load_json(chosen, max_bytes=MAX_PENDINGSET_BYTES),
                                meta.url(chosen), expect)

    return [p for p in run_all(load, task_dirs, threads, "outcommit-discover") if p is not None]
