"""The magic committer: stream to pending multipart uploads, complete at job commit.

Tasks write through :class:`~.filesystem.MagicFileSystem` under the job's magic paths;
task commit gathers the attempt's ``.pending`` data into its pendingset; job commit and
everything after it are the multipart committers' (:mod:`outcommit_s3.commit`).
"""

from __future__ import annotations

import hashlib
import json
import threading
from typing import Any

import fsspec

from outcommit import capabilities as caps
from outcommit.context import TaskAttemptContext
from outcommit.errors import CorruptFileError, TaskCommitError
from outcommit.parallel import outcomes
from outcommit.store import FileInfo

from ..commit.committer import MultipartCommitter
from ..commit.files import PENDING_SUFFIX, PendingCommit, PendingSet, parse_commit
from ..commit.operations import abortable_commits
from .filesystem import BASE, MAGIC, MagicFileSystem


class MagicCommitter(MultipartCommitter):
    """S3A's magic committer: stream to pending multipart uploads, complete at job commit."""

    name = "magic"
    requires = (caps.MULTIPART_DELAYED_COMPLETION, caps.LISTING_CONSISTENT)
    job_dir_prefix = f"{MAGIC}_job-"

    def __init__(self, destination: str, store: Any, config: Any = None) -> None:
        super().__init__(destination, store, config)
        # (attempt id, magic path) -> (upload id, bytes of the .pending this process saved)
        self._magic_uploads: dict[tuple[str, str], tuple[str, bytes]] = {}
        self._magic_lock = threading.Lock()

    def record_magic_upload(self, task: TaskAttemptContext, path: str, upload_id: str | None,
                            pending: bytes = b"") -> str | None:
        """The upload now saved at a magic path (None: forget it); returns the one it replaced."""
        with self._magic_lock:
            key = (task.attempt_id, path)
            previous = self._magic_uploads.pop(key, None)
            if upload_id is not None:
                self._magic_uploads[key] = (upload_id, pending)
        replaced = previous[0] if previous is not None else None
        return replaced if replaced != upload_id else None

    def _saved_pending(self, task: TaskAttemptContext, info: FileInfo) -> bytes | None:
        """The bytes of ``.pending`` file ``info`` when this process provably saved them.

        The listing gives each object's size and etag; a single-PUT object's etag is the
        MD5 of its bytes, so an equal etag proves the stored file is the copy we hold
        (not one rewritten by another writer of this attempt): no GET needed. Anything
        else (another process's file, an etag that is not an MD5, e.g. SSE-KMS) is read.
        """
        with self._magic_lock:
            saved = self._magic_uploads.get((task.attempt_id, info.path[:-len(PENDING_SUFFIX)]))
        body = saved[1] if saved is not None else b""
        if not body or info.etag is None or info.size != len(body):
            return None
        md5 = hashlib.md5(body, usedforsecurity=False).hexdigest()
        return body if md5 == info.etag.strip('"') else None

    def _forget_attempt(self, task: TaskAttemptContext) -> None:
        with self._magic_lock:
            for key in [k for k in self._magic_uploads if k[0] == task.attempt_id]:
                del self._magic_uploads[key]

    def task_attempt_dir(self, task: TaskAttemptContext) -> str:
        return self.layout(task.job).task_attempt_dir(task)

    def work_path(self, task: TaskAttemptContext) -> str:
        return self.store.join(self.task_attempt_dir(task), BASE)

    def filesystem(self, task: TaskAttemptContext) -> fsspec.AbstractFileSystem:
        return MagicFileSystem(self, task, self.store.fs, self.mp.part_size)

    def setup_task(self, task: TaskAttemptContext) -> None:
        self.require_job(task.job, TaskCommitError)

    def _pending_files(self, task: TaskAttemptContext) -> list[str]:
        return [f.path for f in self._attempt_files(task) if f.path.endswith(PENDING_SUFFIX)]

    def _attempt_files(self, task: TaskAttemptContext) -> list[FileInfo]:
        return self.store.list_files(self.task_attempt_dir(task))

    def needs_task_commit(self, task: TaskAttemptContext) -> bool:
        return bool(self._pending_files(task))

    def commit_task(self, task: TaskAttemptContext) -> dict[str, Any]:
        """One listing of the attempt; a GET only for ``.pending`` files another process
        wrote; publish (which checks the job is live before and after); one batched delete.

        The job-liveness check is publish_task's: a check here too would be a second HEAD
        in a row with nothing between them that could change its answer.
        """
        expect = self.expectations(task.job)
        listed = self._attempt_files(task)

        def load(info: FileInfo) -> PendingCommit:
            ours = self._saved_pending(task, info)
            data = self.store.load_json(info.path) if ours is None else json.loads(ours)
            # Validated either way: the same checks whoever wrote it.
            return parse_commit(data, self.store.url(info.path), expect)

        loaded = list(outcomes(load, [f for f in listed if f.path.endswith(PENDING_SUFFIX)],
                               self.threads, "outcommit-pending"))
        commits = [o.result for o in loaded if o.result is not None and o.error is None]
        failed = [(o.item.path, o.error) for o in loaded if o.error is not None]
        if failed:
            # Hadoop's rule: one unreadable .pending fails the task; abort what we know.
            self.abort_task(task)
            path, error = failed[0]
            if isinstance(error, CorruptFileError):
                raise error
            raise TaskCommitError(f"task {task.attempt_id}: cannot load {self.store.url(path)}: "
                                  f"{error}") from error
        pendingset = PendingSet(job_id=task.job_id, task_id=task.task_id, attempt_id=task.attempt_id,
                                commits=sorted(commits, key=lambda c: c.key), committer=self.name)
        message = self.publish_task(task, pendingset)
        # The attempt's files as listed, one DeleteObjects per 1000 (no second listing).
        # Anything that appeared since goes with the job directory at job commit/cleanup.
        self.store.delete_files([f.path for f in listed])
        self._forget_attempt(task)
        return message

    def abort_task(self, task: TaskAttemptContext) -> None:
        log = self.logger(task)
        try:
            expect = self.expectations(task.job)
            commits: list[PendingCommit] = []
            for path in self._pending_files(task):
                try:
                    commits.extend(abortable_commits(self.store, path, expect))
                except OSError:
                    log.warning("unreadable %s: its upload is left to the job's cleanup", path)
            self.ops.abort(commits, log)
            self.abort_published(task)
            self.store.delete(self.task_attempt_dir(task), recursive=True)
            self._forget_attempt(task)
        except Exception:  # abort never raises
            log.warning("abort of task attempt %s failed", task.attempt_id, exc_info=True)
