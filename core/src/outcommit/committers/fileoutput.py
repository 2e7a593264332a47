"""Hadoop's FileOutputCommitter, algorithms 1 and 2, over the store interface.

Layout (one directory per job id, so concurrent jobs to one destination never meet)::

    <dest>/_temporary/<jobId>/<jobAttempt>/_job.json                  job attempt marker
    <dest>/_temporary/<jobId>/<jobAttempt>/_temporary/<attemptId>/    task attempt work path
    <dest>/_temporary/<jobId>/<jobAttempt>/<taskId>/                  committed task (v1)

v1 renames the attempt directory at task commit and merges committed task directories
into the destination at job commit; v2 merges each file into the destination at task
commit, so its output is visible early and a failed task commit cannot be repeated.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from typing import Any

from .. import capabilities as caps
from ..capabilities import Capabilities
from ..committer import TEMPORARY_DIR, Committer, JobDirectoryCommitter, is_hidden, relative_to
from ..context import JobContext, TaskAttemptContext
from ..errors import CommitError, CorruptFileError, JobCommitError, TaskCommitError
from ..store import FileInfo
from ..success import SuccessData

COMMIT_STARTED = "_commit-started.json"
_TASK_ID = re.compile(r"^task_[A-Za-z0-9_.-]+_\d{6}$")


class FileOutputCommitter(JobDirectoryCommitter):
    """Shared layout and lifecycle of the v1 and v2 rename committers."""

    algorithm = 0

    # -- paths ---------------------------------------------------------------------
    def task_attempt_dir(self, task: TaskAttemptContext) -> str:
        return self.store.join(self.job_attempt_dir(task.job), TEMPORARY_DIR, task.attempt_id)

    def committed_task_dir(self, task: TaskAttemptContext) -> str:
        return self.store.join(self.job_attempt_dir(task.job), task.task_id)

    # -- job -------------------------------------------------------------------------
    def cleanup_job(self, job: JobContext) -> None:
        log = self.logger(job)
        try:
            self.store.delete(self.job_dir(job.job_id), recursive=True)
            self.remove_temporary_root()
        except Exception:  # abort and cleanup never raise: they run on failure paths
            log.warning("cleanup of %s failed", self.job_dir(job.job_id), exc_info=True)

    # -- task ------------------------------------------------------------------------
    def _task_message(self, task: TaskAttemptContext, files: Sequence[FileInfo],
                      root: str) -> dict[str, Any]:
        return {
            "committer": self.name,
            "jobId": task.job_id,
            "jobAttempt": task.job.attempt,
            "taskId": task.task_id,
            "taskAttemptId": task.attempt_id,
            "files": [{"path": relative_to(f.path, root), "size": f.size} for f in files],
            "bytes": sum(f.size for f in files),
        }

    def _validate_message(self, job: JobContext, message: Mapping[str, Any]) -> str:
        """Check a task message of this job; returns its task id."""
        where = f"task commit message {dict(message).get('taskAttemptId', '?')}"
        if not isinstance(message, Mapping):
            raise CorruptFileError(where, None, "is not a mapping")
        if message.get("jobId") != job.job_id:
            raise CorruptFileError(where, "jobId",
                                   f"belongs to job {message.get('jobId')!r}, not {job.job_id}")
        task_id = message.get("taskId")
        if not isinstance(task_id, str) or not _TASK_ID.match(task_id):
            raise CorruptFileError(where, "taskId", f"invalid task id {task_id!r}")
        files = message.get("files")
        if not isinstance(files, list):
            raise CorruptFileError(where, "files", "must be a list")
        return task_id

    def _message_files(self, messages: Sequence[Mapping[str, Any]]) -> list[str]:
        names: list[str] = []
        for message in messages:
            for entry in message.get("files", []):
                names.append(self.store.url(self.dest_path(str(entry["path"]))))
        return names

    def _success(self, job: JobContext, files: Sequence[str], started: float,
                 tasks: int, extra: Mapping[str, int] | None = None) -> SuccessData:
        return self.write_success(job, files, metrics={
            "tasks.committed": tasks,
            "commit.duration.ms": int((time.monotonic() - started) * 1000),
            **(extra or {}),
        })


class FileOutputCommitterV1(FileOutputCommitter):
    """Hadoop FileOutputCommitter algorithm 1: rename at task commit, merge at job commit."""

    name = "v1"
    algorithm = 1
    requires = (caps.RENAME_DIRECTORY_ATOMIC, caps.LISTING_CONSISTENT)
    capabilities = Capabilities.of(
        caps.TASK_COMMIT_REPEATABLE,
        caps.JOB_RECOVERABLE,
        caps.OUTPUT_INVISIBLE_UNTIL_JOB_COMMIT,
    )

    def commit_task(self, task: TaskAttemptContext) -> dict[str, Any]:
        self.require_job(task.job, TaskCommitError)
        attempt_dir = self.task_attempt_dir(task)
        committed = self.committed_task_dir(task)
        files = self.store.list_files(attempt_dir)
        message = self._task_message(task, files, attempt_dir)
        if not self.store.exists(attempt_dir):
            self.logger(task).info("task %s: no output to commit", task.attempt_id)
            return message
        # A previous attempt of this task may have committed: the last committer wins.
        self.store.delete(committed, recursive=True)
        self.store.rename_dir(attempt_dir, committed)
        self.logger(task).info("committed task %s (%d files)", task.attempt_id, len(files))
        return message

    def recover_task(self, task: TaskAttemptContext) -> bool:
        """Move the task's committed directory from the previous job attempt into this one."""
        if task.job.attempt == 0:
            return False
        self.require_job(task.job, TaskCommitError)
        previous = self.store.join(self.job_attempt_dir(task.job, task.job.attempt - 1), task.task_id)
        current = self.committed_task_dir(task)
        if not self.store.is_dir(previous):
            self.logger(task).info("task %s: nothing committed in attempt %d to recover",
                                   task.task_id, task.job.attempt - 1)
            return False
        self.store.delete(current, recursive=True)
        self.store.rename_dir(previous, current)
        self.logger(task).info("recovered task %s from job attempt %d", task.task_id,
                               task.job.attempt - 1)
        return True

    def commit_job(self, job: JobContext,
                   messages: Sequence[Mapping[str, Any]] | None = None) -> SuccessData:
        started = time.monotonic()
        log = self.logger(job)
        attempt_dir = self.require_job(job, JobCommitError)
        started_marker = self.store.join(attempt_dir, COMMIT_STARTED)
        if self.store.exists(started_marker):
            raise JobCommitError(
                f"job commit of {job.job_id} was already attempted and v1 job commit is not "
                "repeatable: the destination may hold part of the output. Abort the job, clean "
                "the destination and rerun the job")
        files: list[str] = []
        try:
            if messages is not None:
                task_dirs = [self.store.join(attempt_dir, self._validate_message(job, m))
                             for m in messages if m.get("files")]
                missing = [d for d in task_dirs if not self.store.is_dir(d)]
                if missing:
                    raise CommitError(f"committed task output missing: {missing[0]}")
            else:
                task_dirs = [c.path for c in self.store.list_dir(attempt_dir)
                             if c.is_dir and not is_hidden(c.name)]
            listings = {d: self.store.list_files(d) for d in task_dirs}
            for task_dir, found in listings.items():
                files.extend(self.store.url(self.dest_path(relative_to(f.path, task_dir)))
                             for f in found)
            self.check_destination_free()
            self.store.save_json(started_marker, {"jobId": job.job_id, "started": time.time()})
            if self.conflict_mode == "replace":
                self.replace_destination(job)
            for task_dir in task_dirs:
                for child in self.store.list_dir(task_dir):
                    merge_paths_v1(self, child, self.store.join(self.dest, child.name))
            summary = self._success(job, files, started, len(task_dirs))
        except Exception as exc:
            raise self.failed_commit(job, exc, started, files) from exc
        self.cleanup_job(job)
        log.info("committed job: %d files from %d tasks", len(files), len(task_dirs))
        return summary


def merge_paths_v1(committer: Committer, src: FileInfo, dest: str) -> None:
    """Hadoop's mergePaths, algorithm 1: rename whole directories where the target is free."""
    store = committer.store
    target = store.info(dest)
    if not src.is_dir:
        if target is not None:
            store.delete(dest, recursive=True)
        store.rename_file(src.path, dest)
    elif target is None:
        store.rename_dir(src.path, dest)
    elif not target.is_dir:
        store.delete(dest)
        store.rename_dir(src.path, dest)
    else:
        for child in store.list_dir(src.path):
            merge_paths_v1(committer, child, store.join(dest, child.name))


def merge_paths_v2(committer: Committer, src: FileInfo, dest: str) -> None:
    """Hadoop's mergePaths, algorithm 2: create directories, rename file by file.

    Directories are never renamed onto an existing one, so concurrent task commits into
    the same subdirectory cannot nest it (``sub/sub``).
    """
    store = committer.store
    target = store.info(dest)
    if not src.is_dir:
        if target is not None:
            store.delete(dest, recursive=True)
        store.rename_file(src.path, dest)
        return
    if target is not None and not target.is_dir:
        store.delete(dest)
        target = None
    if target is None:
        store.mkdirs(dest)
    for child in store.list_dir(src.path):
        merge_paths_v2(committer, child, store.join(dest, child.name))


class FileOutputCommitterV2(FileOutputCommitter):
    """Hadoop FileOutputCommitter algorithm 2: merge into the destination at task commit.

    Output is visible before job commit and a failed task commit cannot be repeated:
    not safe for speculative execution.
    """

    name = "v2"
    algorithm = 2
    requires = (caps.RENAME_FILE_ATOMIC, caps.LISTING_CONSISTENT)
    capabilities = Capabilities.of(caps.JOB_COMMIT_REPEATABLE)

    def setup_job(self, job: JobContext) -> None:
        super().setup_job(job)
        if self.conflict_mode == "replace":
            # v2 publishes at task commit: the old data has to go before any task commits.
            self.replace_destination(job)

    def commit_task(self, task: TaskAttemptContext) -> dict[str, Any]:
        self.require_job(task.job, TaskCommitError)
        attempt_dir = self.task_attempt_dir(task)
        files = self.store.list_files(attempt_dir)
        message = self._task_message(task, files, attempt_dir)
        if files:
            for child in self.store.list_dir(attempt_dir):
                merge_paths_v2(self, child, self.store.join(self.dest, child.name))
        self.store.delete(attempt_dir, recursive=True)
        self.logger(task).info("committed task %s into the destination (%d files)",
                               task.attempt_id, len(files))
        return message

    def recover_task(self, task: TaskAttemptContext) -> bool:
        # The committed output is already in the destination.
        return False

    def commit_job(self, job: JobContext,
                   messages: Sequence[Mapping[str, Any]] | None = None) -> SuccessData:
        started = time.monotonic()
        self.require_job(job, JobCommitError)
        files: list[str] = []
        try:
            if messages is not None:
                for m in messages:
                    self._validate_message(job, m)
                files = self._message_files(messages)
            else:
                files = [self.store.url(f.path) for f in self.store.list_files(self.dest)
                         if not any(is_hidden(p) for p in
                                    relative_to(f.path, self.dest).split("/"))]
            summary = self._success(job, files, started, len(messages or []))
        except Exception as exc:
            raise self.failed_commit(job, exc, started, files) from exc
        self.cleanup_job(job)
        return summary

