"""Hadoop's manifest committer: task commit saves a manifest, job commit renames files in parallel.

For stores with atomic *file* rename but slow or non-atomic *directory* rename (ABFS,
GCS). Layout, one directory per job id::

    <dest>/_temporary/<jobId>/<NN>/_job.json                         job attempt marker
    <dest>/_temporary/<jobId>/<NN>/tasks/<taskAttemptId>/...          task attempt output
    <dest>/_temporary/<jobId>/<NN>/manifests/<taskId>-manifest.json   committed manifests

Task commit lists the attempt's directory once, saves the manifest under the attempt's
own name and renames it over the task's manifest path: the last committed attempt wins
and nothing reaches the destination. Job commit loads the manifests (the messages, or a
listing), lists the task attempts' files once (sizes and etags from the store: a manifest
that disagrees fails the commit), creates the directories, renames every file, optionally
validates, writes ``_SUCCESS`` and cleans up. A rename that raised may still have happened: the store
decides from evidence (``Store.rename_outcome``) before the committer retries or fails.
"""

from __future__ import annotations

import posixpath
import time
import uuid
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any

from ... import capabilities as caps
from ... import conflictmodes
from ...capabilities import Capabilities
from ...committer import relative_to
from ...config import Config
from ...context import JobContext, TaskAttemptContext
from ...errors import JobCommitError, TaskCommitError
from ...jobdir import JobDirectoryCommitter
from ...progress import Progress
from ...reporting import JobReports
from ...retry import RetryPolicy
from ...store import FileInfo, Store
from ...success import SuccessData
from .. import journal
from . import stages
from .format import (
    MANIFEST_SUFFIX,
    CheckedFile,
    DirEntry,
    FileEntry,
    TaskManifest,
    check_manifest,
)
from .stages import StageConfig, Stats

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

class ManifestReports(JobReports):
    """The manifest committer's reports: saved where Hadoop's manifest committer saves
    them, when that is set."""

    def summary_report_dir(self) -> str | None:
        """Hadoop's manifest report directory first, then the core one."""
        return self.config.get_str(REPORT_DIR_KEY) or super().summary_report_dir()


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
        self.reports = ManifestReports(self)
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
        self.stage_config(Stats()).parallel(lambda p: self.store.delete(p, recursive=True), task_dirs)
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
            self.stage_config(Stats()).with_retries(publish, f"save manifest of {task.attempt_id}")
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
    def stage_config(self, stats: Stats, job: JobContext | None = None) -> StageConfig:
        """What the stages of a job commit share (``job``: whose manifests they check)."""
        def check(data: Any, where: str) -> list[CheckedFile]:
            if job is None:
                raise AssertionError("manifests are checked only within a job commit")
            return self._check(job, data, where)

        return StageConfig(store=self.store, dest=self.dest, threads=self.threads, retry=self.retry,
                           stats=stats, check=check, delete_target_files=self.delete_target_files,
                           delete_target_key=DELETE_TARGET_KEY)

    def commit_job(self, job: JobContext,
                   messages: Sequence[Mapping[str, Any]] | None = None) -> SuccessData:
        started = self.reports.commit_started()
        log = self.logger(job)
        stats = Stats()
        cfg = self.stage_config(stats, job)
        files: list[CheckedFile] = []
        try:
            done = self.recovery.committed_before(job, lambda: self.require_job(job, JobCommitError))
            if done is not None:
                return done
            with stats.stage("load-manifests"):
                files, tasks = stages.load_manifests(cfg, messages, lambda: self._manifest_paths(job))
            files, resumed = self._observe_sources(job, cfg, files)
            if not resumed:
                self._resolve_conflicts(job, files)
            with stats.stage("create-directories"):
                stages.create_directories(cfg, files)
            with stats.stage("rename-files"):
                progress = Progress("renaming files", len(files), log, self.config)
                try:
                    stages.rename_files(cfg, files, resumed, progress)
                finally:
                    progress.close()
            if self.validate_output:
                with stats.stage("validate-output"):
                    stages.validate_output(cfg, files)
            metrics = {"tasks.committed": tasks, "bytes.committed": sum(f.size for f in files),
                       "commit.threads": self.threads, **stats.counts,
                       "commit.duration.ms": int((time.monotonic() - started) * 1000)}
            summary = self.reports.write_success(job, [self.store.url(f.dest) for f in files], metrics,
                                         {"validated": str(self.validate_output).lower()})
        except Exception as exc:
            raise self.reports.failed_commit(job, exc, started, [self.store.url(f.dest) for f in files],
                                     dict(stats.counts)) from exc
        with stats.stage("cleanup"):
            self.end_job_and_delete_state(job)
        return summary

    def _observe_sources(self, job: JobContext, cfg: StageConfig,
                         files: list[CheckedFile]) -> tuple[list[CheckedFile], bool]:
        """The files as the store has them (one listing of the sources, beside the check
        for a journal: no round trip of its own), and whether this commit resumes an
        interrupted one (its journal)."""
        with ThreadPoolExecutor(1, thread_name_prefix="outcommit-sources") as beside:
            listing = beside.submit(stages.list_sources, cfg, self._source_roots(job, files))
            # The journal is per job, not per job attempt: a restarted driver (attempt
            # N+1) that recovers the tasks must know that attempt N already renamed files
            # into the destination, or conflict handling would take them for foreign data
            # ('fail' refuses, 'replace' deletes them while their sources are gone).
            resumed = journal.exists(self.store, self.job_dir(job.job_id))
            wait([listing])
        journaled: dict[str, FileInfo] = {}
        if resumed:
            self.recovery.refuse_resume_if_aborted(job)
            cfg.stats.add("commit.resumed")
            self.logger(job).info("resuming an interrupted job commit")
            # What the first commit observed of the sources it may have renamed since.
            published = self.load_journal(job)
            journaled = {e.source: FileInfo(e.source, e.size, False, e.etag)
                         for e in (published.entries if published else ())}
        # Sizes and etags from the store, not the manifests: the journal's are what an
        # abort checks before deleting a destination file (a claim of 999 bytes for a
        # 5-byte file would make it keep the job's own file), and _SUCCESS reports them.
        with cfg.stats.stage("observe-sources"):
            return stages.observe_sources(cfg, files, listing.result(), journaled), resumed

    def _resolve_conflicts(self, job: JobContext, files: Sequence[CheckedFile]) -> None:
        """The conflict mode, then the journal of what the renames will publish. Once per
        job: a resumed commit must not delete its own output."""
        conflictmodes.check_destination_free(self)
        if self.conflict_mode == "replace":
            conflictmodes.replace_destination(self, job)
        self.save_journal(job, [journal.Entry(f.source, f.dest, f.size, f.etag) for f in files])

    def _source_roots(self, job: JobContext, files: Sequence[CheckedFile]) -> set[str]:
        """The tasks directory of every job attempt whose task attempts the files come from
        (``<jobDir>/<NN>/tasks``; the manifests were checked to stay inside one)."""
        job_dir = self.job_dir(job.job_id)
        return {self.store.join(job_dir, *relative_to(f.source, job_dir).split("/")[:2])
                for f in files}

    def _manifest_paths(self, job: JobContext) -> list[str]:
        return [c.path for c in self.store.list_dir(self.manifests_dir(job))
                if not c.is_dir and c.name.endswith(MANIFEST_SUFFIX)]

    def _check(self, job: JobContext, data: Any, where: str) -> list[CheckedFile]:
        manifest = TaskManifest.from_dict(data, where)
        return check_manifest(
            manifest, where, job_id=job.job_id, job_dir=self.job_dir(job.job_id), dest=self.dest,
            strip=self.store.strip,
            attempt_dir_of=lambda attempt_id, n: self.store.join(
                self.tasks_dir(job, n), attempt_id))
