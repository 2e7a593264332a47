"""Where a multipart job keeps its state: one directory per job, one per job attempt.

On the destination's store for ``magic`` (``<dest>/__magic_job-<jobId>/``) and for
``directory``/``partitioned`` (``<dest>/__staging_job-<jobId>/``, or under
``outcommit.s3.staging.shared-dir``)::

    <root>/<jobAttempt>/_job.json                                   the job attempt is live
    <root>/<jobAttempt>/_commit-started.json                        job commit has begun
    <root>/<jobAttempt>/pendingsets/<taskId>/<attemptId>.pendingset one per committed attempt
    <root>/<jobAttempt>/pendingsets/<taskId>/_claim.json            first attempt to commit
    <root>/<jobAttempt>/pendingsets/<taskId>/_allowed.json          the driver's permission
    <root>/<jobAttempt>/tasks/<attemptId>/__base/...                magic: where a task writes

A job's directory is always a direct child of its destination (or of the shared
directory): that is how a pending-upload sweep tells another live job's uploads apart.
"""

from __future__ import annotations

from dataclasses import dataclass

from outcommit.context import JobContext, TaskAttemptContext
from outcommit.store import Store

from .files import PENDINGSET_SUFFIX

JOB_MARKER = "_job.json"
COMMIT_STARTED = "_commit-started.json"
PENDINGSETS = "pendingsets"
TASKS = "tasks"
CLAIM = "_claim.json"
ALLOWED = "_allowed.json"

#: Job directories of every committer here: a live one means another job is writing.
JOB_DIR_PREFIXES = ("__magic_job-", "__staging_job-")
#: Top-level names in a destination that no commit may target (committers' own areas).
RESERVED = ("__magic", *JOB_DIR_PREFIXES, "_temporary")


@dataclass(frozen=True)
class JobLayout:
    """The paths of one job's state on the store ``meta``."""

    meta: Store
    root: str  # the job's directory: <parent>/<prefix><jobId>

    @classmethod
    def of(cls, meta: Store, parent: str, prefix: str, job_id: str) -> JobLayout:
        return cls(meta, meta.join(parent, f"{prefix}{job_id}"))

    def attempt_dir(self, job: JobContext, attempt: int | None = None) -> str:
        return self.meta.join(self.root, str(job.attempt if attempt is None else attempt))

    def marker(self, job: JobContext, attempt: int | None = None) -> str:
        return self.meta.join(self.attempt_dir(job, attempt), JOB_MARKER)

    def commit_started(self, job: JobContext, attempt: int | None = None) -> str:
        return self.meta.join(self.attempt_dir(job, attempt), COMMIT_STARTED)

    def pendingsets_dir(self, job: JobContext, attempt: int | None = None) -> str:
        return self.meta.join(self.attempt_dir(job, attempt), PENDINGSETS)

    def task_dir(self, task: TaskAttemptContext, attempt: int | None = None) -> str:
        """The task's pendingsets, claim and permission (of job attempt ``attempt``)."""
        return self.meta.join(self.pendingsets_dir(task.job, attempt), task.task_id)

    def pendingset(self, job: JobContext, task_id: str, attempt_id: str) -> str:
        return self.meta.join(self.pendingsets_dir(job), task_id, attempt_id + PENDINGSET_SUFFIX)

    def claim(self, task: TaskAttemptContext) -> str:
        return self.meta.join(self.task_dir(task), CLAIM)

    def allowed(self, task: TaskAttemptContext) -> str:
        return self.meta.join(self.task_dir(task), ALLOWED)

    def task_attempt_dir(self, task: TaskAttemptContext) -> str:
        """Magic: the attempt's own directory of files and ``.pending`` data."""
        return self.meta.join(self.attempt_dir(task.job), TASKS, task.attempt_id)
