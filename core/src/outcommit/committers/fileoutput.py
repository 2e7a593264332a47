"""Hadoop's FileOutputCommitter, algorithms 1 and 2, over the store interface.

Layout (one directory per job id, so concurrent jobs to one destination never meet)::

    <dest>/_temporary/<jobId>/<jobAttempt>/_job.json                  job attempt marker
    <dest>/_temporary/<jobId>/<jobAttempt>/_temporary/<attemptId>/    task attempt work path
    <dest>/_temporary/<jobId>/<jobAttempt>/<taskId>/                  committed task (v1)

v1 renames the attempt directory at task commit and merges committed task directories
into the destination at job commit; v2 merges each file into the destination at task
commit, so its output is visible early and a failed task commit cannot be repeated.

v1's job commit saves a publish journal (:mod:`.journal`) before its first merge, per
job: a later call or the next job attempt resumes it without redoing conflict handling,
and an abort removes what it had already moved.
"""

from __future__ import annotations

import posixpath
import re
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .. import capabilities as caps
from .. import conflictmodes
from ..capabilities import Capabilities
from ..committer import TEMPORARY_DIR, is_hidden, relative_to
from ..context import JobContext, TaskAttemptContext
from ..errors import CommitError, CorruptFileError, JobCommitError, TaskCommitError
from ..jobdir import JobDirectoryCommitter
from ..parallel import run_all
from ..progress import Progress
from ..store import FileInfo
from ..success import SuccessData
from . import journal
from .mergepaths import merge_paths_v1, merge_paths_v2

#: v2: where each task commit records what it published (inside the job attempt directory).
TASK_RECORDS_DIR = "_tasks"
_TASK_ID = re.compile(r"^task_[A-Za-z0-9_.-]+_\d{6}$")


class FileOutputCommitter(JobDirectoryCommitter):
    """Shared layout and lifecycle of the v1 and v2 rename committers."""

    algorithm = 0

    # -- paths ---------------------------------------------------------------------
    def task_attempt_dir(self, task: TaskAttemptContext) -> str:
        return self.store.join(self.job_attempt_dir(task.job), TEMPORARY_DIR, task.attempt_id)

    def committed_task_dir(self, task: TaskAttemptContext) -> str:
        return self.store.join(self.job_attempt_dir(task.job), task.task_id)

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
        return self.reports.write_success(job, files, metrics={
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
        # Resumed from the publish journal (beyond Hadoop, whose v1 job commit is not).
        caps.JOB_COMMIT_REPEATABLE,
        caps.JOB_RECOVERABLE,
        caps.OUTPUT_INVISIBLE_UNTIL_JOB_COMMIT,
    )

    def commit_task(self, task: TaskAttemptContext) -> dict[str, Any]:
        self.require_job(task.job, TaskCommitError)
        attempt_dir = self.task_attempt_dir(task)
        committed = self.committed_task_dir(task)
        if not self.store.exists(attempt_dir):
            if self.store.is_dir(committed):
                # A repeated commit of this attempt (the first one's result was lost): its
                # output is already the task's committed directory, not "no output".
                message = self._task_message(task, self.store.list_files(committed), committed)
                self.logger(task).info("task %s: already committed (%d files)", task.attempt_id,
                                       len(message["files"]))
                return message
            self.logger(task).info("task %s: no output to commit", task.attempt_id)
            return self._task_message(task, [], attempt_dir)
        files = self.store.list_files(attempt_dir)
        message = self._task_message(task, files, attempt_dir)
        try:
            # A previous attempt of this task may have committed: the last committer wins.
            self.store.delete(committed, recursive=True)
            self.store.rename_dir(attempt_dir, committed)
        except Exception as exc:
            self.abandon_if_job_ended(task, [committed])  # the job's cleanup took our directory
            raise TaskCommitError(f"task commit of {task.attempt_id} failed renaming "
                                  f"{self.store.url(attempt_dir)}: {exc}") from exc
        self.abandon_if_job_ended(task, [committed])
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

    def journal_sources(self, job: JobContext) -> Callable[[journal.Entry], Sequence[str]]:
        # A recovered task's committed directory moved to the next job attempt's.
        job_dir = self.job_dir(job.job_id)
        attempts = [a.path for a in self.store.list_dir(job_dir) if a.is_dir]

        def sources(entry: journal.Entry) -> list[str]:
            inside = relative_to(entry.source, job_dir).split("/", 1)[1]
            return [self.store.join(a, inside) for a in attempts]
        return sources

    def _task_dirs(self, job: JobContext, attempt_dir: str,
                   messages: Sequence[Mapping[str, Any]] | None, resumed: bool) -> list[str]:
        """Committed task directories to merge: the messages' tasks, or all of them."""
        if messages is None:
            return [c.path for c in self.store.list_dir(attempt_dir)
                    if c.is_dir and not is_hidden(c.name)]
        task_dirs = [self.store.join(attempt_dir, self._validate_message(job, m))
                     for m in messages if m.get("files")]
        # A resumed commit may already have merged a task's directory away entirely.
        missing = [d for d in task_dirs if not resumed and not self.store.is_dir(d)]
        if missing:
            raise CommitError(f"committed task output missing: {missing[0]}")
        return task_dirs

    def _refuse_if_published_files_gone(self, job: JobContext, published: journal.Journal,
                                        waiting: Sequence[tuple[FileInfo, str]]) -> None:
        """A resumed commit lists every journaled file in ``_SUCCESS``, so each must still
        be in the destination as this job published it (same size, same etag where renames
        keep it), or be one this commit moves there now. An abort that began may have taken
        some away before it died or kept the state; another job's ``replace`` may have
        deleted them (the stateful machine's long run, v1 on memory); someone may have
        written another file there since: the commit would report success for output that
        is not there. One request per journaled file, on a resume only."""
        coming = {dest for _, dest in waiting}

        def gone(entry: journal.Entry) -> bool:
            return entry.dest not in coming and not journal.holds(self.store, entry)

        # Two tasks' files at one destination: the merge let the last one win (Hadoop's v1),
        # and only that one can still be there.
        entries = list({e.dest: e for e in published.entries}.values())
        lost = run_all(gone, entries, self.threads, name="outcommit-resume")
        missing = [e.dest for e, is_gone in zip(entries, lost, strict=True) if is_gone]
        if missing:
            raise JobCommitError(
                f"{len(missing)} file(s) journaled by the interrupted commit of job {job.job_id} "
                f"being resumed are gone or replaced (never published, deleted by an abort of it "
                f"that began or by another job's replace, overwritten by another writer), e.g. "
                f"{self.store.url(missing[0])}: resuming would report output that is not there; "
                "abort the job")

    def commit_job(self, job: JobContext,
                   messages: Sequence[Mapping[str, Any]] | None = None) -> SuccessData:
        started = self.reports.commit_started()
        log = self.logger(job)
        attempt_dir = self.job_attempt_dir(job)
        files: list[str] = []
        try:
            # Inside: a store error of the job check fails with the success=false report too.
            done = self.recovery.committed_before(job, lambda: self.require_job(job, JobCommitError))
            if done is not None:
                return done
            published = self.load_journal(job)
            task_dirs = self._task_dirs(job, attempt_dir, messages, published is not None)
            waiting = [(f, self.dest_path(relative_to(f.path, d)))
                       for d in task_dirs for f in self.store.list_files(d)]
            if published is None:
                # Conflict handling runs once per job: a resumed commit must not refuse or
                # delete the files an earlier try already moved.
                conflictmodes.check_destination_free(self)
                if self.conflict_mode == "replace":
                    conflictmodes.replace_destination(self, job)
                published = self.save_journal(job, journal.entries_from(waiting))
            else:
                self.recovery.refuse_resume_if_aborted(job)
                self._refuse_if_published_files_gone(job, published, waiting)
                log.info("resuming an interrupted job commit (%d files journaled)",
                         len(published.entries))
            files = sorted({self.store.url(e.dest) for e in published.entries}
                           | {self.store.url(dest) for _, dest in waiting})
            progress = Progress("merging committed tasks", len(task_dirs), log, self.config,
                                unit="task")
            try:
                for task_dir in task_dirs:
                    for child in self.store.list_dir(task_dir):
                        merge_paths_v1(self, child, self.store.join(self.dest, child.name))
                    progress.advance()
            finally:
                progress.close()
            summary = self._success(job, files, started, len(task_dirs))
        except Exception as exc:
            raise self.reports.failed_commit(job, exc, started, files) from exc
        self.end_job_and_delete_state(job)
        return summary


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
            conflictmodes.replace_destination(self, job)

    def commit_task(self, task: TaskAttemptContext) -> dict[str, Any]:
        self.require_job(task.job, TaskCommitError)
        attempt_dir = self.task_attempt_dir(task)
        files = self.store.list_files(attempt_dir)
        if not files:
            # A repeated commit of this attempt (its files already published, its directory
            # gone) answers as the first did: an empty record would replace the task's, and
            # a job commit by discovery would then leave its files out of _SUCCESS.
            recorded = self._recorded_message(task)
            if recorded is not None:
                self.logger(task).info("task %s: already committed", task.attempt_id)
                return recorded
        message = self._task_message(task, files, attempt_dir)
        if files:
            for child in self.store.list_dir(attempt_dir):
                merge_paths_v2(self, child, self.store.join(self.dest, child.name))
        self.store.delete(attempt_dir, recursive=True)
        # What this task published, for a job commit without messages (Hadoop's flow):
        # the destination also holds data of earlier jobs, and _SUCCESS lists this job's.
        record = self.task_record(task.job, task.task_id)
        self.store.save_json(record, message)
        self.abandon_if_job_ended(task, [record])
        self.logger(task).info("committed task %s into the destination (%d files)",
                               task.attempt_id, len(files))
        return message

    def _recorded_message(self, task: TaskAttemptContext) -> dict[str, Any] | None:
        """This attempt's own task record, if its commit already ran."""
        try:
            recorded = self.store.load_json(self.task_record(task.job, task.task_id))
        except (FileNotFoundError, CorruptFileError):
            return None
        if isinstance(recorded, dict) and recorded.get("taskAttemptId") == task.attempt_id:
            return recorded
        return None

    def task_record(self, job: JobContext, task_id: str) -> str:
        return self.store.join(self.job_attempt_dir(job), TASK_RECORDS_DIR, f"{task_id}.json")

    def _recorded_messages(self, job: JobContext) -> list[Mapping[str, Any]]:
        """The messages the job's task commits recorded (one per task: the last commit)."""
        records = self.store.join(self.job_attempt_dir(job), TASK_RECORDS_DIR)
        found = sorted(f.path for f in self.store.list_files(records) if f.path.endswith(".json"))
        # One read per task, `threads` at once: one after another, 1,000 tasks would be
        # 1,000 round trips of job commit.
        return run_all(self.store.load_json, found, min(self.threads, len(found)), name="outcommit-records")

    def recover_task(self, task: TaskAttemptContext) -> bool:
        # The committed output is already in the destination.
        return False

    def _check_published(self, messages: Sequence[Mapping[str, Any]]) -> None:
        """Before ``_SUCCESS`` says so, every file the tasks published is still there, with
        its size: they published as they committed, and another job's ``replace`` (or
        anyone) may have deleted one since. One listing per directory they wrote."""
        expected = {self.dest_path(str(entry["path"])): entry.get("size")
                    for message in messages for entry in message.get("files", [])}
        directories = sorted({posixpath.dirname(path) for path in expected})
        listed = run_all(self.store.list_dir, directories, min(self.threads, len(directories)),
                         name="outcommit-check")
        found = {info.path: info.size for listing in listed for info in listing if not info.is_dir}
        missing = [path for path, size in expected.items()
                   if path not in found or (isinstance(size, int) and found[path] != size)]
        if missing:
            raise CommitError(f"{len(missing)} file(s) the job's tasks published are gone or changed, "
                              f"e.g. {self.store.url(missing[0])} (another job's conflict mode "
                              "'replace'?): the job's output is not complete; run the job again")

    def commit_job(self, job: JobContext,
                   messages: Sequence[Mapping[str, Any]] | None = None) -> SuccessData:
        started = self.reports.commit_started()
        files: list[str] = []
        try:
            # Repeatable, as Hadoop requires of v2: the job's own report means it is done. A
            # later attempt's tasks published again: it writes its own report.
            done = self.recovery.committed_before(job, lambda: self.require_job(job, JobCommitError),
                                         later_attempts=False)
            if done is not None:
                return done
            if messages is None:
                messages = self._recorded_messages(job)
            for m in messages:
                self._validate_message(job, m)
            files = self._message_files(messages)
            self._check_published(messages)
            summary = self._success(job, files, started, len(messages))
        except Exception as exc:
            raise self.reports.failed_commit(job, exc, started, files) from exc
        self.end_job_and_delete_state(job)
        return summary

