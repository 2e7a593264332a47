"""Which attempt of a task a job commits when no task messages say so (Hadoop-style discovery).

* the attempt the driver recorded with ``allow_task_commit`` (``_allowed.json``);
* else the first attempt that committed (``_claim.json``, created exclusively, so a
  stale attempt that commits late cannot take it over); an aborted attempt releases
  its claim, so the retry the driver allows after a failed task commit still commits
  (HADOOP-17258);
* else the only published pendingset, if there is exactly one.

With task messages (Spark, the local engine) the messages decide and claims are unused.
"""

from __future__ import annotations

import json
import logging
import time

from outcommit import capabilities as caps
from outcommit.context import TaskAttemptContext
from outcommit.errors import CommitError, CorruptFileError
from outcommit.store import ExclusiveCreate, Store
from outcommit.storeoptional import required

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


def exclusive(meta: Store) -> ExclusiveCreate:
    """The exclusive create of the store holding a job's state: every delayed committer
    requires ``fs.create.exclusive`` (checked by the factory on its destination; a staging
    committer's shared store is checked here), for claims, pendingsets and commit records."""
    return required(meta.exclusive_create(), meta, caps.CREATE_EXCLUSIVE,
                    "publishing pendingsets, claims and the job commit record")


def claim(layout: JobLayout, task: TaskAttemptContext, attempt_id: str | None = None,
          logger: logging.Logger | logging.LoggerAdapter = log) -> list[str]:  # type: ignore[type-arg]
    """Claim the task for ``attempt_id`` (default: this attempt) unless an attempt has.

    Returns the files created (the claim), so a failing caller can remove them again.
    """
    meta, path = layout.meta, layout.claim(task)
    owner = attempt_id or task.attempt_id
    try:
        record = json.dumps({"taskAttemptId": owner, "time": time.time()}).encode()
        exclusive(meta).create_exclusive(path, record)
        return [path]
    except FileExistsError:
        holder = read_attempt(meta, path)
        if holder != owner:
            logger.warning("task %s was first committed by %s; %s is committed only if the driver "
                        "allows it or passes its message to commit_job", task.task_id, holder, owner)
    return []


def release(layout: JobLayout, task: TaskAttemptContext) -> None:
    """Give the claim up if this attempt holds it (its task commit is being undone)."""
    path = layout.claim(task)
    if read_attempt(layout.meta, path) == task.attempt_id:
        layout.meta.delete(path)


def allow(layout: JobLayout, task: TaskAttemptContext) -> None:
    """Record the driver's permission for this attempt (it wins over any claim)."""
    layout.meta.write_atomic(layout.allowed(task),
                             json.dumps({"taskAttemptId": task.attempt_id}).encode())


def choose(meta: Store, task_dir: str) -> str | None:
    """Path of the pendingset to commit for one task, or None when none may be."""
    entries = {e.name: e.path for e in meta.list_dir(task_dir) if not e.is_dir}
    published = {n[:-len(PENDINGSET_SUFFIX)]: p for n, p in entries.items()
                 if n.endswith(PENDINGSET_SUFFIX)}
    for marker in (ALLOWED, CLAIM):
        if marker in entries:
            attempt = read_attempt(meta, entries[marker])
            if attempt is None:
                raise CorruptFileError(meta.url(entries[marker]), "taskAttemptId", "is missing")
            return published.get(attempt)  # the chosen attempt may not have committed: None
    if len(published) > 1:
        raise CommitError(f"task directory {meta.url(task_dir)} holds pendingsets of "
                          f"{len(published)} attempts and no record of which one committed")
    return next(iter(published.values()), None)
