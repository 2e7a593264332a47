"""Which attempt of a task is committed, and publishing an attempt's pendingset.

The first attempt to commit a task publishes its pendingset *as the task's claim*
(``_claim.pendingset``), created exclusively: one request both publishes and claims, and
a stale attempt that commits late cannot take the claim over. A later attempt publishes
under its own name (``<attemptId>.pendingset``), also exclusively, so no attempt can
overwrite another's nor change its own after publishing.

Which attempt a job commit completes when no task messages say so (Hadoop-style discovery):

* the attempt the driver recorded with ``allow_task_commit`` (``_allowed.json``);
* else the claim; an aborted attempt deletes its claim, so the retry the driver allows
  after a failed task commit still commits (HADOOP-17258);
* else the only published pendingset, if there is exactly one.

With task messages (Spark, the local engine) the messages decide: a message names its
attempt and whether its pendingset is the claim.
"""

from __future__ import annotations

import json
import logging

from outcommit.context import TaskAttemptContext
from outcommit.errors import CommitError, CorruptFileError
from outcommit.store import Store

from .files import PENDINGSET_SUFFIX
from .layout import ALLOWED, CLAIM, JobLayout

log = logging.getLogger(__name__)


def read_attempt(meta: Store, path: str) -> str | None:
    """The attempt id a claim or permission file names (None: missing or unreadable)."""
    try:
        value = meta.load_json(path).get("taskAttemptId")
    except (FileNotFoundError, CorruptFileError, AttributeError):
        return None
    return value if isinstance(value, str) else None


def publish(layout: JobLayout, task: TaskAttemptContext, data: bytes, attempt_id: str | None = None,
            logger: logging.Logger | logging.LoggerAdapter = log) -> tuple[str, bool]:  # type: ignore[type-arg]
    """Publish ``attempt_id``'s pendingset (default: this attempt's): as the task's claim
    if no attempt holds it, else under the attempt's own name.

    Returns the path and whether this call created it (False: the attempt had already
    published there, a repeated task commit, which the caller must check says the same).
    """
    meta, claim = layout.meta, layout.claim(task)
    owner = attempt_id or task.attempt_id
    try:
        meta.create_exclusive(claim, data)
        return claim, True
    except FileExistsError:
        holder = read_attempt(meta, claim)
        if holder == owner:
            return claim, False
        logger.warning("task %s was first committed by %s; %s is committed only if the driver "
                       "allows it or passes its message to commit_job", task.task_id, holder, owner)
    own = layout.pendingset(task.job, task.task_id, owner)
    try:
        meta.create_exclusive(own, data)
        return own, True
    except FileExistsError:
        return own, False


def published_by(layout: JobLayout, task: TaskAttemptContext) -> str | None:
    """Where this attempt's pendingset is published (its own name or the claim), or None."""
    own = layout.pendingset(task.job, task.task_id, task.attempt_id)
    if layout.meta.exists(own):
        return own
    claim = layout.claim(task)
    return claim if read_attempt(layout.meta, claim) == task.attempt_id else None


def allow(layout: JobLayout, task: TaskAttemptContext) -> None:
    """Record the driver's permission for this attempt (it wins over any claim)."""
    layout.meta.write_atomic(layout.allowed(task),
                             json.dumps({"taskAttemptId": task.attempt_id}).encode())


def choose(meta: Store, task_dir: str) -> str | None:
    """Path of the pendingset to commit for one task, or None when none may be."""
    entries = {e.name: e.path for e in meta.list_dir(task_dir) if not e.is_dir}
    claim = entries.get(CLAIM)
    published = {n[:-len(PENDINGSET_SUFFIX)]: p for n, p in entries.items()
                 if n.endswith(PENDINGSET_SUFFIX) and n != CLAIM}
    if ALLOWED in entries:
        attempt = read_attempt(meta, entries[ALLOWED])
        if attempt is None:
            raise CorruptFileError(meta.url(entries[ALLOWED]), "taskAttemptId", "is missing")
        if attempt in published:
            return published[attempt]
        if claim is not None and read_attempt(meta, claim) == attempt:
            return claim
        return None  # the allowed attempt has not committed
    if claim is not None:
        return claim
    if len(published) > 1:
        raise CommitError(f"task directory {meta.url(task_dir)} holds pendingsets of "
                          f"{len(published)} attempts and no record of which one committed")
    return next(iter(published.values()), None)
