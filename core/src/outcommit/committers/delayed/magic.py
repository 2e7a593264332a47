"""Magic committers: tasks stream to pending uploads, job commit completes them.

The base of S3's ``magic`` (multipart uploads) and Azure's ``blocklist`` (blocks staged
under the final names). Tasks write through :class:`~.filesystem.MagicFileSystem` under the job's magic paths.
An attempt set up in this process keeps its uploads in memory (:mod:`.tracker`): a file
smaller than a part costs its two requests (start, part), and task commit three
(publish the pendingset exclusively, claim the task, check the job is still live; two
without the claim when the engine commits with task messages, ``JobContext.task_messages``).
With ``outcommit.magic.track-commits-in-memory=false`` (Hadoop:
``fs.s3a.committer.magic.track.commits.in.memory.enabled``), or for a filesystem sent to
another process, writers save ``.pending`` files that task commit lists and reads. Job
commit and everything after it are :class:`~.committer.DelayedCompletionCommitter`'s.
"""

from __future__ import annotations

import threading
from typing import Any, ClassVar

import fsspec

from outcommit import capabilities as caps
from outcommit.context import TaskAttemptContext
from outcommit.errors import CorruptFileError, TaskCommitError, UnsupportedWriteError
from outcommit.parallel import outcomes
from outcommit.store import FileInfo

from .committer import DelayedCompletionCommitter
from .files import PENDING_SUFFIX, PendingCommit, PendingSet, parse_commit
from .filesystem import BASE, MAGIC, MagicFileSystem, _rebuilding
from .operations import abortable_commits
from .tracker import AttemptUploads


class MagicCommitterBase(DelayedCompletionCommitter):
    """Stream to pending uploads through magic paths, complete them at job commit."""

    requires: ClassVar[tuple[str, ...]] = (caps.MULTIPART_DELAYED_COMPLETION, caps.CREATE_EXCLUSIVE,
                                           caps.LISTING_CONSISTENT)
    job_dir_prefix = f"{MAGIC}_job-"
    #: Key: keep an attempt's uploads in the memory of the process that set it up.
    in_memory_key: ClassVar[str] = ""
    #: Key: parts uploaded in the background at once, per task attempt.
    upload_threads_key: ClassVar[str] = ""

    def __init__(self, destination: str, store: Any, config: Any = None) -> None:
        super().__init__(destination, store, config)
        self.in_memory = self.config.get_bool(self.in_memory_key, True) if self.in_memory_key else True
        self.upload_threads = (self.config.get_int(self.upload_threads_key, 4, minimum=1)
                               if self.upload_threads_key else 4)
        # Attempts set up by this process, by attempt id: their uploads, in memory.
        self._attempts: dict[str, AttemptUploads] = {}
        self._attempts_lock = threading.Lock()

    # -- where a task writes -------------------------------------------------------------------
    def task_attempt_dir(self, task: TaskAttemptContext) -> str:
        return self.layout(task.job).task_attempt_dir(task)

    def work_path(self, task: TaskAttemptContext) -> str:
        return self.store.join(self.task_attempt_dir(task), BASE)

    def _tracker(self, task: TaskAttemptContext) -> AttemptUploads | None:
        with self._attempts_lock:
            return self._attempts.get(task.attempt_id)

    def filesystem(self, task: TaskAttemptContext) -> fsspec.AbstractFileSystem:
        tracker = self._tracker(task)
        if tracker is None and self.in_memory and not _rebuilding.active:
            # Its uploads would be invisible to the process that commits the attempt.
            raise UnsupportedWriteError(
                f"task attempt {task.attempt_id} was not set up in this process, and {self.name} "
                "uploads are tracked in the memory of the process that set it up: call "
                "setup_task(task) here (and commit the task here), or set "
                f"{self.in_memory_key}=false to write from several processes")
        return MagicFileSystem(self, task, self.store.fs, self.mp.part_size, tracker)

    # -- task lifecycle ----------------------------------------------------------------------------
    def setup_task(self, task: TaskAttemptContext) -> None:
        if not self.in_memory:
            self.require_job(task.job, TaskCommitError)  # a stale attempt writes nothing
            return
        # No request: the task commit checks the job after publishing (write, then check).
        with self._attempts_lock:
            if task.attempt_id not in self._attempts:
                self._attempts[task.attempt_id] = AttemptUploads(self.mp, self.upload_threads,
                                                                 requests=self.threads)

    def _end_attempt(self, task: TaskAttemptContext) -> None:
        with self._attempts_lock:
            tracker = self._attempts.pop(task.attempt_id, None)
        if tracker is not None:
            tracker.close()

    def needs_task_commit(self, task: TaskAttemptContext) -> bool:
        tracker = self._tracker(task)
        if tracker is not None and not tracker.shared:
            return bool(tracker)
        return bool(tracker) or bool(self._pending_files(task))

    def _pending_files(self, task: TaskAttemptContext) -> list[FileInfo]:
        return [f for f in self.store.list_files(self.task_attempt_dir(task))
                if f.path.endswith(PENDING_SUFFIX)]

    def commit_task(self, task: TaskAttemptContext) -> dict[str, Any]:
        """The attempt's uploads (from memory; listed and read only for writers elsewhere)
        become its pendingset, published and claimed; the job is checked afterwards."""
        tracker = self._tracker(task)
        commits: list[PendingCommit] = []
        listed: list[FileInfo] = []
        if tracker is not None:
            errors = tracker.wait()
            if errors:
                self.abort_task(task)
                # An upload started before the job ended fails once the job's abort or
                # cleanup aborted it: then the ended job is the cause to report.
                try:
                    self.require_job(task.job, TaskCommitError)
                except TaskCommitError as ended:
                    raise ended from errors[0]
                raise TaskCommitError(f"task {task.attempt_id}: an upload failed: {errors[0]}") \
                    from errors[0]
            commits = tracker.commits()
        if tracker is None or tracker.shared:
            listed = self._pending_files(task)
            commits += self._load_pending(task, listed)
        pendingset = PendingSet(job_id=task.job_id, task_id=task.task_id, attempt_id=task.attempt_id,
                                commits=sorted(commits, key=lambda c: c.key), committer=self.name)
        message = self.publish_task(task, pendingset)
        if listed:
            # The .pending files as listed and their markers, one DeleteObjects per 1000.
            # Anything that appeared since goes with the job directory at job commit/cleanup.
            self.store.delete_files([p for f in listed for p in (f.path, f.path[:-len(PENDING_SUFFIX)])])
        self._end_attempt(task)
        return message

    def _load_pending(self, task: TaskAttemptContext, listed: list[FileInfo]) -> list[PendingCommit]:
        """Read and validate ``.pending`` files; one unreadable file fails the task (Hadoop's rule)."""
        expect = self.expectations(task.job)

        def load(info: FileInfo) -> PendingCommit:
            return parse_commit(self.store.load_json(info.path), self.store.url(info.path), expect)

        loaded = list(outcomes(load, listed, self.threads, "outcommit-pending"))
        failed = [(o.item.path, o.error) for o in loaded if o.error is not None]
        if failed:
            self.abort_task(task)
            path, error = failed[0]
            if isinstance(error, CorruptFileError):
                raise error
            raise TaskCommitError(f"task {task.attempt_id}: cannot load {self.store.url(path)}: "
                                  f"{error}") from error
        return [o.result for o in loaded if o.result is not None]

    def abort_task(self, task: TaskAttemptContext) -> None:
        log = self.logger(task)
        try:
            tracker = self._tracker(task)
            commits: list[PendingCommit] = []
            if tracker is not None:
                tracker.wait()
                commits += tracker.commits()
            if tracker is None or tracker.shared:
                expect = self.expectations(task.job)
                for info in self._pending_files(task):
                    try:
                        commits.extend(abortable_commits(self.store, info.path, expect))
                    except OSError:
                        log.warning("unreadable %s: its upload is left to the job's cleanup", info.path)
                self.store.delete(self.task_attempt_dir(task), recursive=True)
            self.ops.abort(commits, log)
            self.abort_published(task)
        except Exception:  # abort never raises
            log.warning("abort of task attempt %s failed", task.attempt_id, exc_info=True)
        finally:
            self._end_attempt(task)

