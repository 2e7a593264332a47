"""Hadoop's manifest committer: task commit saves a manifest, job commit renames files in parallel.

For stores with atomic *file* rename but slow or non-atomic *directory* rename (ABFS,
GCS). Layout, one directory per job id::

    <dest>/_temporary/<jobId>/<NN>/_job.json                         job attempt marker
    <dest>/_temporary/<jobId>/<NN>/tasks/<taskAttemptId>/...          task attempt output
    <dest>/_temporary/<jobId>/<NN>/manifests/<taskId>-manifest.json   committed manifests

Task commit lists the attempt's directory once, saves the manifest under the attempt's
own name and renames it over the task's manifest path: the last committed attempt wins
and nothing reaches the destination. Job commit loads the manifests (the messages, or a
listing), creates the directories, renames every file, optionally validates, writes
``_SUCCESS`` and cleans up. A rename that raised may still have happened: the store
decides from evidence (``Store.rename_outcome``) before the committer retries or fails.
"""

from __future__ import annotations

import logging
import posixpath
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from .. import capabilities as caps
from ..capabilities import Capabilities
from ..committer import JobDirectoryCommitter, relative_to
from ..config import Config
from ..context import JobContext, TaskAttemptContext
from ..errors import CommitError, CorruptFileError, JobCommitError, RenameError, TaskCommitError
from ..parallel import run_all
from ..retry import RetryLater, RetryPolicy
from ..store import FileInfo, Store
from ..success import SuccessData
from . import journal
from .manifest_format import (
    MANIFEST_SUFFIX,
    CheckedFile,
    DirEntry,
    FileEntry,
    TaskManifest,
    check_manifest,
)

TASKS_DIR = "tasks"
MANIFESTS_DIR = "manifests"

VALIDATE_KEY = "outcommit.manifest.validate-output"
DELETE_TARGET_KEY = "outcommit.manifest.delete-target-files"
REPORT_DIR_KEY = "outcommit.manifest.summary-report-dir"
ATTEMPTS_KEY = "outcommit.manifest.io-attempts"
BACKOFF_KEY = "outcommit.manifest.retry-backoff-ms"

CONFIG_KEYS: dict[str, str] = {
    VALIDATE_KEY: "manifest: check every output file's size/etag after job commit (default false)",
    DELETE_TARGET_KEY: "manifest: delete existing destination files before rename (default false: "
                       "an existing file fails the commit)",
    REPORT_DIR_KEY: "manifest: directory to save each job's summary report, also on failure",
    ATTEMPTS_KEY: "manifest: attempts per store request on throttling or transient errors "
                  "(default: outcommit.retry.attempts)",
    BACKOFF_KEY: "manifest: first retry delay cap in ms, doubled per retry, full jitter "
                 "(default: outcommit.retry.backoff-ms)",
}

log = logging.getLogger("outcommit.committer.manifest")

T = TypeVar("T")
R = TypeVar("R")


class Stats:
    """Thread-safe counters and stage timings for the ``_SUCCESS`` metrics."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counts: Counter[str] = Counter()

    def add(self, name: str, amount: int = 1) -> None:
        with self._lock:
            self.counts[name] += amount

    def stage(self, name: str) -> _StageTimer:
        return _StageTimer(self, name)


class _StageTimer:
    def __init__(self, stats: Stats, name: str) -> None:
        self.stats, self.name = stats, name

    def __enter__(self) -> None:
        self.started = time.monotonic()

    def __exit__(self, *exc: object) -> None:
        self.stats.add(f"stage.{self.name}.duration.ms", int((time.monotonic() - self.started) * 1000))


class ManifestCommitter(JobDirectoryCommitter):
    """Hadoop's manifest committer: manifests at task commit, parallel file renames at job commit."""

    name = "manifest"
    requires = (caps.RENAME_FILE_ATOMIC, caps.LISTING_CONSISTENT)
    capabilities = Capabilities.of(
        # Nothing is renamed at task commit: another attempt's manifest simply replaces it.
        caps.TASK_COMMIT_REPEATABLE,
        # Manifests stay until success; renamed files are recognised by rename_outcome.
        caps.JOB_COMMIT_REPEATABLE,
        # A committed manifest of job attempt N-1 is copied into attempt N.
        caps.JOB_RECOVERABLE,
        caps.OUTPUT_INVISIBLE_UNTIL_JOB_COMMIT,
        # Each attempt's manifest names only its own directory; job commit takes the messages'.
        caps.TASK_COMMIT_ISOLATED,
    )

    def __init__(self, destination: str, store: Store, config: Config | None = None) -> None:
        super().__init__(destination, store, config)
        self.validate_output = self.config.get_bool(VALIDATE_KEY, False)
        self.delete_target_files = self.config.get_bool(DELETE_TARGET_KEY, False)
        self.retry = RetryPolicy.from_config(self.config, ATTEMPTS_KEY, BACKOFF_KEY)

    # -- paths ---------------------------------------------------------------------
    def attempt_dir_name(self, attempt: int) -> str:
        return f"{attempt:02d}"  # Hadoop's <NN>

    def tasks_dir(self, job: JobContext, attempt: int | None = None) -> str:
        return self.store.join(self.job_attempt_dir(job, attempt), TASKS_DIR)

    def manifests_dir(self, job: JobContext, attempt: int | None = None) -> str:
        return self.store.join(self.job_attempt_dir(job, attempt), MANIFESTS_DIR)

    def task_attempt_dir(self, task: TaskAttemptContext) -> str:
        return self.store.join(self.tasks_dir(task.job), task.attempt_id)

    def manifest_path(self, job: JobContext, task_id: str, attempt: int | None = None) -> str:
        return self.store.join(self.manifests_dir(job, attempt), task_id + MANIFEST_SUFFIX)

    # -- job -------------------------------------------------------------------------
    def delete_job_state(self, job: JobContext) -> None:
        """Attempt directories in parallel (slow recursive delete on object stores), then the job."""
        job_dir = self.job_dir(job.job_id)
        attempts = [c.path for c in self.store.list_dir(job_dir) if c.is_dir]
        task_dirs = [t.path for a in attempts
                     for t in self.store.list_dir(self.store.join(a, TASKS_DIR)) if t.is_dir]
        self._parallel(lambda p: self.store.delete(p, recursive=True), task_dirs)
        self.store.delete(job_dir, recursive=True)

    # -- task ------------------------------------------------------------------------
    def build_manifest(self, task: TaskAttemptContext) -> TaskManifest:
        """One recursive listing of the attempt's directory: files and the directories they need."""
        attempt_dir = self.task_attempt_dir(task)
        files: list[FileEntry] = []
        directories: dict[str, int] = {}
        for info in self.store.list_files(attempt_dir):
            relative = relative_to(info.path, attempt_dir)
            target = self.dest_path(relative)
            files.append(FileEntry(self.store.url(info.path), self.store.url(target), info.size,
                                   info.etag))
            parent = posixpath.dirname(relative)
            while parent:
                directories.setdefault(parent, parent.count("/") + 1)
                parent = posixpath.dirname(parent)
        return TaskManifest(
            job_id=task.job_id, job_attempt=task.job.attempt, task_id=task.task_id,
            task_attempt_id=task.attempt_id, task_attempt_dir=self.store.url(attempt_dir),
            files=files,
            directories=[DirEntry(self.store.url(self.dest_path(d)), level)
                         for d, level in sorted(directories.items())],
            iostatistics={"counters": {"files": len(files), "bytes": sum(f.size for f in files)}})

    def commit_task(self, task: TaskAttemptContext) -> dict[str, Any]:
        self.require_job(task.job, TaskCommitError)
        log = self.logger(task)
        manifest = self.build_manifest(task).to_dict()
        final = self.manifest_path(task.job, task.task_id)
        temporary = self.store.join(self.manifests_dir(task.job),
                                    f"{task.attempt_id}{MANIFEST_SUFFIX}.tmp-{uuid.uuid4().hex[:8]}")

        def publish() -> None:
            # Saved under the attempt's own name, then renamed over the task's path: a reader
            # sees one attempt's whole manifest, and the last committed attempt wins.
            self.store.save_json(temporary, manifest)
            try:
                self.store.rename_file(temporary, final, overwrite=True)
            except BaseException:
                self.store.delete(temporary)
                raise

        try:
            self._with_retries(publish, f"save manifest of {task.attempt_id}", Stats())
        except Exception as exc:
            raise TaskCommitError(f"task commit of {task.attempt_id} failed saving its manifest "
                                  f"{self.store.url(final)}: {exc}") from exc
        self.abandon_if_job_ended(task, [final, self.task_attempt_dir(task)])
        log.info("committed task %s: manifest of %d files", task.attempt_id, len(manifest["files"]))
        return manifest

    def recover_task(self, task: TaskAttemptContext) -> bool:
        """Carry the task's committed manifest of the previous job attempt into this one."""
        if task.job.attempt == 0:
            return False
        self.require_job(task.job, TaskCommitError)
        previous = self.manifest_path(task.job, task.task_id, task.job.attempt - 1)
        if not self.store.exists(previous):
            return False
        data = self.store.load_json(previous)
        self._check(task.job, data, self.store.url(previous))  # refuse a tampered manifest
        self.store.save_json(self.manifest_path(task.job, task.task_id), data)
        self.logger(task).info("recovered task %s from job attempt %d", task.task_id,
                               task.job.attempt - 1)
        return True

    # -- job commit ------------------------------------------------------------------
    def commit_job(self, job: JobContext,
                   messages: Sequence[Mapping[str, Any]] | None = None) -> SuccessData:
        started = time.monotonic()
        log = self.logger(job)
        stats = Stats()
        files: list[CheckedFile] = []
        try:
            self.require_job(job, JobCommitError)
            with stats.stage("load-manifests"):
                files, tasks = self._load(job, messages, stats)
            # The journal is per job, not per job attempt: a restarted driver (attempt N+1)
            # that recovers the tasks must know that attempt N already renamed files into
            # the destination, or conflict handling would take them for foreign data
            # ('fail' refuses, 'replace' deletes them while their sources are gone).
            resumed = journal.exists(self.store, self.job_dir(job.job_id))
            if resumed:
                stats.add("commit.resumed")
                log.info("resuming an interrupted job commit")
            else:
                # Conflict handling runs once: a resumed commit must not delete its own output.
                self.check_destination_free()
                if self.conflict_mode == "replace":
                    self.replace_destination(job)
                self.save_journal(job, [journal.Entry(f.source, f.dest, f.size, f.etag)
                                        for f in files])
            with stats.stage("create-directories"):
                self._create_directories(files, stats)
            with stats.stage("rename-files"):
                self._parallel(lambda f: self._rename(f, stats, resumed), files)
            if self.validate_output:
                with stats.stage("validate-output"):
                    self._parallel(lambda f: self._validate(f, stats), files)
            metrics = self._metrics(stats, files, tasks, started)
            summary = self.write_success(job, [self.store.url(f.dest) for f in files], metrics,
                                         {"validated": str(self.validate_output).lower()})
        except Exception as exc:
            raise self.failed_commit(job, exc, started, [self.store.url(f.dest) for f in files],
                                     dict(stats.counts)) from exc
        with stats.stage("cleanup"):
            self.cleanup_job(job)
        log.info("committed job: %d files from %d tasks", len(files), tasks)
        return summary

    def _check(self, job: JobContext, data: Any, where: str) -> list[CheckedFile]:
        manifest = TaskManifest.from_dict(data, where)
        return check_manifest(
            manifest, where, job_id=job.job_id, job_dir=self.job_dir(job.job_id), dest=self.dest,
            strip=self.store.strip,
            attempt_dir_of=lambda attempt_id, n: self.store.join(
                self.tasks_dir(job, n), attempt_id))

    def _load(self, job: JobContext, messages: Sequence[Mapping[str, Any]] | None,
              stats: Stats) -> tuple[list[CheckedFile], int]:
        """Validated files of every committed task; refuses two files with one destination."""
        if messages is not None:
            sources: list[tuple[str, Any]] = [
                (f"task commit message {i} ({dict(m).get('taskAttemptID', '?')})"
                 if isinstance(m, Mapping) else f"task commit message {i}", m)
                for i, m in enumerate(messages)]
        else:
            paths = [c.path for c in self.store.list_dir(self.manifests_dir(job))
                     if not c.is_dir and c.name.endswith(MANIFEST_SUFFIX)]
            loaded = self._parallel(lambda p: self.store.load_json(p), paths)
            sources = [(self.store.url(p), data) for p, data in zip(paths, loaded, strict=True)]
        checked = [(where, self._check(job, data, where)) for where, data in sources]
        task_ids: dict[str, str] = {}
        for where, data in sources:
            task_id = data["taskID"]
            if task_id in task_ids:
                raise CorruptFileError(where, "taskID",
                                       f"task {task_id} is committed twice (also {task_ids[task_id]})")
            task_ids[task_id] = where
        files: list[CheckedFile] = []
        owners: dict[str, str] = {}
        for where, entries in checked:
            for entry in entries:
                if entry.dest in owners:
                    raise CorruptFileError(where, "files",
                                           f"destination {self.store.url(entry.dest)} is also "
                                           f"written by {owners[entry.dest]}")
                owners[entry.dest] = where
                files.append(entry)
        # A file of one task where another task needs a directory cannot be committed.
        for entry in files:
            parent = posixpath.dirname(entry.dest)
            while parent != self.dest and parent.startswith(self.dest):
                if parent in owners:
                    raise CommitError(f"{self.store.url(parent)} is a file of one task and a "
                                      "directory of another: the tasks' outputs conflict")
                parent = posixpath.dirname(parent)
        stats.add("manifests.loaded", len(sources))
        return files, len(sources)

    def _create_directories(self, files: Sequence[CheckedFile], stats: Stats) -> None:
        """Create the merged set of parent directories; delete a file where a directory must go."""
        wanted: set[str] = set()
        for entry in files:
            parent = posixpath.dirname(entry.dest)
            while parent != self.dest and parent.startswith(self.dest + "/"):
                wanted.add(parent)
                parent = posixpath.dirname(parent)

        def probe(path: str) -> FileInfo | None:
            return self._with_retries(lambda: self.store.info(path), f"probe {path}", stats)

        found = dict(zip(sorted(wanted), self._parallel(probe, sorted(wanted)), strict=True))
        for path, status in found.items():
            if status is not None and not status.is_dir:
                self.store.delete(path)
                stats.add("directories.file-deleted")
        leaves = [d for d, status in found.items() if status is None or not status.is_dir]
        leaves = [d for d in leaves if not any(o.startswith(d + "/") for o in leaves)]
        self._parallel(lambda d: self._with_retries(lambda: self.store.mkdirs(d), f"mkdirs {d}", stats),
                       leaves)
        stats.add("directories.created", len(leaves))

    def _rename(self, entry: CheckedFile, stats: Stats, resumed: bool = False) -> None:
        """Rename one file; after a failure the store's evidence decides: done, retry or fail."""
        known = FileInfo(entry.source, entry.size, False, entry.etag)
        # On a resumed commit the target may be this job's own renamed file, whose source
        # is gone: deleting it would lose it. Only a source still waiting makes the target
        # someone else's file.
        replace_target = self.delete_target_files and (not resumed or self.store.exists(entry.source))

        def attempt() -> None:
            if replace_target and not stats_of_attempts:
                self.store.delete(entry.dest)
            stats_of_attempts.append(1)
            try:
                self.store.rename_file(entry.source, entry.dest, overwrite=False)
                stats.add("files.renamed")
                stats.add("bytes.renamed", entry.size)
                return
            except Exception as exc:
                failure = exc
            # The evidence is store requests too: under throttling they are retried, not fatal.
            outcome = self._with_retries(
                lambda: self.store.rename_outcome(entry.source, entry.dest, known),
                f"check rename of {entry.source}", stats)
            if isinstance(failure, FileExistsError) and outcome != "done":
                # Not our own earlier rename (a resumed commit): someone else's file is there.
                raise RenameError(
                    f"cannot commit {self.store.url(entry.dest)}: a file already exists there. "
                    f"Set {DELETE_TARGET_KEY}=true to replace existing files, or use "
                    "conflict mode 'replace'") from failure
            if outcome == "done":
                stats.add("files.renamed")
                stats.add("bytes.renamed", entry.size)
                stats.add("rename.recovered")
                log.info("rename %s -> %s raised (%s) but had happened", entry.source, entry.dest,
                         failure)
                return
            if outcome == "unknown":
                raise RenameError(
                    f"rename {self.store.url(entry.source)} -> {self.store.url(entry.dest)} failed "
                    f"({type(failure).__name__}: {failure}) and the store cannot tell whether it "
                    "happened: failing the job rather than guessing") from failure
            throttled = self.store.is_throttling(failure)
            if throttled:
                stats.add("store.throttled")
            if not (throttled or self.store.is_transient(failure)):
                raise RenameError(
                    f"rename {self.store.url(entry.source)} -> {self.store.url(entry.dest)} failed: "
                    f"{type(failure).__name__}: {failure}") from failure
            raise RetryLater(failure)  # it did not happen: the same rename may succeed later

        stats_of_attempts: list[int] = []
        try:
            self.retry.call(attempt, retry_if=lambda e: isinstance(e, RetryLater),
                            what=f"rename of {entry.source}",
                            on_retry=lambda _e: stats.add("rename.retried"))
        except RetryLater as exc:
            raise RenameError(
                f"rename {self.store.url(entry.source)} -> {self.store.url(entry.dest)} failed "
                f"after {len(stats_of_attempts)} attempt(s): {type(exc.cause).__name__}: "
                f"{exc.cause}") from exc.cause

    def _validate(self, entry: CheckedFile, stats: Stats) -> None:
        status = self.store.info(entry.dest)
        if status is None or status.is_dir:
            raise CommitError(f"validation: {self.store.url(entry.dest)} is missing after job commit")
        if status.size != entry.size:
            raise CommitError(f"validation: {self.store.url(entry.dest)} has {status.size} bytes, "
                              f"the manifest of {entry.task_id} says {entry.size}")
        if (entry.etag and status.etag and status.etag != entry.etag
                and self.store.has_capability(caps.ETAGS_PRESERVED_IN_RENAME)):
            raise CommitError(f"validation: {self.store.url(entry.dest)} has etag {status.etag}, "
                              f"the manifest of {entry.task_id} says {entry.etag}")
        stats.add("files.validated")

    def _metrics(self, stats: Stats, files: Sequence[CheckedFile], tasks: int,
                 started: float) -> dict[str, int]:
        return {"tasks.committed": tasks, "bytes.committed": sum(f.size for f in files),
                "commit.threads": self.threads, **stats.counts,
                "commit.duration.ms": int((time.monotonic() - started) * 1000)}

    # -- helpers ---------------------------------------------------------------------
    def _parallel(self, action: Callable[[T], R], items: Iterable[T]) -> list[R]:
        """Run ``action`` on every item with ``threads`` workers; the first error is raised."""
        return run_all(action, items, self.threads, "outcommit-manifest")

    def _with_retries(self, action: Callable[[], T], what: str, stats: Stats) -> T:
        """Retry an idempotent store request on throttling or transient failures."""
        def retryable(exc: BaseException) -> bool:
            throttled = self.store.is_throttling(exc)
            if throttled:
                stats.add("store.throttled")
            return throttled or self.store.is_transient(exc)

        return self.retry.call(action, retry_if=retryable, what=what)

    def summary_report_dir(self) -> str | None:
        """Hadoop's manifest report directory first, then the core one."""
        return self.config.get_str(REPORT_DIR_KEY) or super().summary_report_dir()
