"""The staging committers (Netflix's): write locally, upload at task commit, complete at job commit.

A task writes to a local directory. Task commit uploads every file as a multipart upload
that it does not complete, and publishes the task's pendingset twice: as its commit
message, and in a consistent shared directory (the destination's ``__staging_job-<jobId>``
or ``outcommit.s3.staging.shared-dir``) where an exclusive create and the claim rules of
:mod:`outcommit.committers.delayed.claims` make exactly one attempt per task the committed one.

``directory`` applies the conflict mode to the whole destination; ``partitioned`` only to
the partition directories the job writes (dynamic partition overwrite with ``replace``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any, NoReturn

import fsspec

from outcommit import capabilities as caps
from outcommit.committers.delayed.files import PendingCommit, PendingSet, is_reserved_target
from outcommit.committers.delayed.layout import RESERVED, JobLayout
from outcommit.committers.delayed.pendingsets import parse_bytes
from outcommit.context import JobContext, TaskAttemptContext
from outcommit.errors import ConfigError, DestinationExistsError, TaskCommitError
from outcommit.parallel import outcomes
from outcommit.paths import earlier_partition_dir, relative_to
from outcommit.store import Store

from ..commit.committer import MultipartCommitter
from ..settings import HADOOP_ALIASES, STAGING_DIR, STAGING_SHARED_DIR, setting

UNIQUE_FILENAMES = "outcommit.committer.unique-filenames"


class StagingDirError(ConfigError, OSError):
    """``outcommit.s3.staging.tmp-dir`` cannot hold a task's output on this host (missing
    parent, a regular file, not writable, a read-only or pseudo filesystem).

    A ConfigError (the setting must change) and an OSError (it is this host's disk: an
    engine retries the task, perhaps on an executor whose disk works)."""


def add_unique(name: str, unique: str) -> str:
    """``part-0001.snappy.parquet`` -> ``part-0001-<unique>.snappy.parquet`` (Hadoop's rule).

    A name that already carries it (Spark's and outcommit's writers put the job id in
    every name) is left alone, as Hadoop does: never ``...-<jobId>-<jobId>``.
    """
    if unique in name:
        return name
    dot = name.find(".", 1)
    return f"{name}-{unique}" if dot < 0 else f"{name[:dot]}-{unique}{name[dot:]}"


class StagingCommitter(MultipartCommitter):
    """Shared logic of ``directory`` and ``partitioned``."""

    job_dir_prefix = "__staging_job-"

    def __init__(self, destination: str, store: Store, config: Any = None) -> None:
        super().__init__(destination, store, config)
        self.unique_filenames = self.config.get_bool(UNIQUE_FILENAMES, True)
        self._tmp_dir = setting(self.config, STAGING_DIR)
        self.local_root = os.path.join(self._tmp_dir or tempfile.gettempdir(), "outcommit-staging")
        shared = self.config.get_str(STAGING_SHARED_DIR)
        self._shared_url = shared
        self._shared: Store | None = None

    # -- the shared directory of pendingsets -------------------------------------------------------
    @property
    def meta(self) -> Store:
        if self._shared_url is None:
            return self.store
        if self._shared is None:
            from outcommit.factory import open_store

            self._shared = open_store(self._shared_url, self.config)
        return self._shared

    def layout(self, job: JobContext) -> JobLayout:
        if self._shared_url is None:
            return super().layout(job)
        return JobLayout.of(self.meta, self.meta.strip(self._shared_url), self.job_dir_prefix, job.job_id)

    # -- local task output -----------------------------------------------------------------------------
    def local_job_dir(self, job: JobContext) -> str:
        return os.path.join(self.local_root, job.job_id)

    def work_path(self, task: TaskAttemptContext) -> str:
        return os.path.join(self.local_job_dir(task.job), task.attempt_id)

    def filesystem(self, task: TaskAttemptContext) -> fsspec.AbstractFileSystem:
        return fsspec.filesystem("file", auto_mkdir=True)

    def setup_task(self, task: TaskAttemptContext) -> None:
        # No request: a stale attempt only writes locally, and its task commit checks the
        # job after publishing (write, then check).
        # Checked here, on the host that writes, and not at setup_job: the driver's disks
        # are not the executors' (a path may exist on one and not the other).
        try:
            os.makedirs(self.work_path(task), exist_ok=True)
        except OSError as exc:
            where = (f"{STAGING_DIR} (Hadoop: {HADOOP_ALIASES[STAGING_DIR]}) = {self._tmp_dir!r}"
                     if self._tmp_dir else f"the system temp directory {tempfile.gettempdir()!r} "
                     f"({STAGING_DIR} unset)")
            raise StagingDirError(
                f"{where} cannot hold the {self.name} committer's task output on this host: "
                f"{exc.strerror or exc} creating {self.work_path(task)}; set {STAGING_DIR} "
                f"to a writable local directory") from exc

    def _local_files(self, task: TaskAttemptContext) -> list[tuple[str, str]]:
        """(local path, relative path) of every file the task wrote, whatever its name.

        Nothing is skipped, as ``v1``, ``v2``, ``manifest`` and ``magic`` publish every
        file of a task attempt: a name starting with ``_`` or ``.`` is the writer's choice
        (``_src=a/`` is a Hive partition, which readers and Spark read as data), and no
        local writer here leaves checksum files (fsspec's local filesystem writes no
        ``.crc``, unlike Hadoop's, which Hadoop's own filter skips).
        """
        root = self.work_path(task)
        found = []

        def lost(error: OSError) -> NoReturn:  # os.walk would skip what it cannot list
            raise self._lost(task, error) from error
        for folder, _, files in os.walk(root, onerror=lost):
            for name in files:
                full = os.path.join(folder, name)
                found.append((full, os.path.relpath(full, root).replace(os.sep, "/")))
        return sorted(found, key=lambda f: f[1])

    def _lost(self, task: TaskAttemptContext, error: OSError | None = None) -> TaskCommitError:
        why = f" ({error})" if error is not None else ""
        return TaskCommitError(
            f"task {task.attempt_id}: its local staging directory {self.work_path(task)} is gone "
            f"or cannot be listed{why}: the attempt's output is lost (a tmp cleaner, a lost disk, "
            "a recycled container?); the task must run again")

    def _published(self, task: TaskAttemptContext) -> PendingSet | None:
        """This attempt's pendingset if its task commit already published it (the staging
        directory is removed right after): a repeated task commit, not lost output."""
        path = self.layout(task.job).pendingset(task.job, task.task_id, task.attempt_id)
        if not self.meta.exists(path):
            return None
        return parse_bytes(self.meta.read_bytes(path), self.meta.url(path), self.expectations(task.job))

    def needs_task_commit(self, task: TaskAttemptContext) -> bool:
        """setup_task created the staging directory: if it is gone, the attempt's output is
        lost and this raises (as Hadoop's does), rather than answering False, which would
        make the engine skip the task commit and the job commit without the task's files."""
        if not os.path.isdir(self.work_path(task)):
            if self._published(task) is not None:
                return True  # committed already: commit_task repeats it
            raise self._lost(task)
        return bool(self._local_files(task))

    def final_path(self, task: TaskAttemptContext, relative: str) -> str:
        folder, _, name = relative.rpartition("/")
        if self.unique_filenames:
            name = add_unique(name, task.job_id)
        return self.dest_path(f"{folder}/{name}" if folder else name)

    def _upload(self, task: TaskAttemptContext, local: str, final: str,
                started: list[PendingCommit]) -> PendingCommit:
        part_size = self.mp.part_size
        upload_id = self.mp.initiate(final)
        bucket, _, key = final.partition("/")
        commit = PendingCommit(bucket=bucket, key=key, upload_id=upload_id, etags=(), length=0,
                               job_id=task.job_id, task_id=task.task_id,
                               filename=os.path.basename(local), scheme=self.uri_schemes[0])
        started.append(commit)  # known from now on: aborted if anything below fails
        etags: list[str] = []
        length = 0
        with open(local, "rb") as source:
            while True:
                chunk = source.read(part_size)
                if not chunk and etags:
                    break
                etags.append(self.mp.upload_part(final, upload_id, len(etags) + 1, chunk))
                length += len(chunk)
                if len(chunk) < part_size:
                    break
        return PendingCommit(bucket=bucket, key=key, upload_id=upload_id, etags=tuple(etags),
                             length=length, job_id=task.job_id, task_id=task.task_id,
                             filename=os.path.basename(local), scheme=self.uri_schemes[0])

    def check_task_partitions(self, task: TaskAttemptContext, finals: list[str]) -> None:
        """Conflict mode ``fail``, scoped to partitions: which partitions a job writes is
        known only once its tasks wrote them, so each task checks its own before it
        uploads anything (job commit checks all of them again)."""

    def check_not_reserved(self, task: TaskAttemptContext, files: list[tuple[str, str]]) -> None:
        """A file that would land on ``_SUCCESS`` or in a committer's own area (``__magic…``,
        ``__staging_job-…``, ``_temporary``) fails the task here, before any upload: job
        commit would refuse its pendingset. It is never skipped (that would lose it)."""
        for local, final in files:
            relative = relative_to(final, self.dest)
            if is_reserved_target(relative, RESERVED):  # as job commit's check of pendingsets
                raise TaskCommitError(f"task {task.attempt_id}: {local} would be committed as "
                                      f"{self.store.url(final)}, which the committer reserves "
                                      f"({relative.split('/', 1)[0]!r}): write it under another name")

    def commit_task(self, task: TaskAttemptContext) -> dict[str, Any]:
        """Upload every file (two requests each below a part), publish: three requests."""
        if not os.path.isdir(self.work_path(task)):
            # setup_task created it: either this attempt's commit already ran (a repeat,
            # which answers the same again), or its output is gone and the task must fail.
            published = self._published(task)
            if published is None:
                raise self._lost(task)
            return self.publish_task(task, published)
        files = [(local, self.final_path(task, relative)) for local, relative in self._local_files(task)]
        self.check_not_reserved(task, files)
        self.check_task_partitions(task, [final for _, final in files])
        started: list[PendingCommit] = []
        uploaded = list(outcomes(lambda f: self._upload(task, f[0], f[1], started), files, self.threads,
                                 "outcommit-upload"))
        failed = [(o.item, o.error) for o in uploaded if o.error is not None]
        if failed:
            self.ops.abort(started, self.logger(task))
            (local, final), error = failed[0]
            raise TaskCommitError(f"task {task.attempt_id}: upload of {local} to "
                                  f"{self.store.url(final)} failed: {error}") from error
        pendingset = PendingSet(job_id=task.job_id, task_id=task.task_id, attempt_id=task.attempt_id,
                                commits=[o.result for o in uploaded if o.result is not None],
                                committer=self.name)
        message = self.publish_task(task, pendingset)
        shutil.rmtree(self.work_path(task), ignore_errors=True)
        return message

    def abort_task(self, task: TaskAttemptContext) -> None:
        try:
            self.abort_published(task)
        except Exception:  # abort never raises
            self.logger(task).warning("abort of task attempt %s failed", task.attempt_id, exc_info=True)
        shutil.rmtree(self.work_path(task), ignore_errors=True)

    def cleanup_local(self, job: JobContext) -> None:
        shutil.rmtree(self.local_job_dir(job), ignore_errors=True)


class DirectoryStagingCommitter(StagingCommitter):
    """Netflix's staging committer; the conflict mode applies to the whole destination."""

    name = "directory"


class PartitionedStagingCommitter(StagingCommitter):
    """Netflix's staging committer; the conflict mode applies only to the partitions written."""

    name = "partitioned"
    capabilities = StagingCommitter.capabilities.with_(caps.DYNAMIC_PARTITION_OVERWRITE)
    conflict_scope = "partitions"

    def check_task_partitions(self, task: TaskAttemptContext, finals: list[str]) -> None:
        if self.conflict_mode != "fail":
            return
        partitions = sorted({final.rpartition("/")[0] for final in finals} - {self.dest})
        for partition in partitions:  # one probe per partition the task wrote
            # ...and one for its name under an earlier release's escaping, where it differs
            earlier = earlier_partition_dir(relative_to(partition, self.dest))
            names = [partition, *([self.store.join(self.dest, earlier)] if earlier else [])]
            held = next((name for name in names if self.store.is_dir(name)), None)
            if held is not None:
                self.abort_task(task)
                raise DestinationExistsError(
                    f"partition {self.store.url(held)} of {self.destination} already holds data "
                    "and the conflict mode is 'fail': task commit refused before uploading anything "
                    "(use 'append' or 'replace', or another destination)")
