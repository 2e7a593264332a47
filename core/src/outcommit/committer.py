"""The committer protocol and the base class every committer builds on."""

from __future__ import annotations

import logging
import posixpath
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

import fsspec

from . import capabilities as caps
from . import conflictmodes, iostats, progress
from .capabilities import Capabilities
from .config import Config
from .context import JobContext, TaskAttemptContext
from .errors import (
    ConfigError,
    CorruptFileError,
    DestinationExistsError,
    JobCommitError,
)
from .iostats import IOStatistics, merge_snapshots
from .jobstate import ABORT_NOTE, JOB_MARKER, JobEvidence, attempts_in
from .paths import is_hidden, is_inside, relative_to
from .recovery import JobRecovery
from .retry import RetryPolicy
from .store import Store
from .success import SUCCESS_FILE, SuccessData, load_success

log = logging.getLogger(__name__)

TEMPORARY_DIR = "_temporary"
THREADS_KEY = "outcommit.committer.threads"
CONFLICT_KEY = "outcommit.committer.conflict-mode"
CONFLICT_MODES = conflictmodes.MODES


class JobLogger(logging.LoggerAdapter):  # type: ignore[type-arg]
    """Puts the job id in every record of a commit: in the text, and as the record
    attributes ``job_id`` (and ``task_attempt_id`` for a task's records), which JSON log
    handlers carry as fields."""

    def process(self, msg: Any, kwargs: Any) -> tuple[Any, Any]:
        kwargs["extra"] = {**self.extra, **(kwargs.get("extra") or {})}  # type: ignore[dict-item]
        return f"[job {self.extra['job_id']}] {msg}", kwargs  # type: ignore[index]


class Components(Protocol):
    """The installed stores and committers, as a committer reaches them: injected by the
    composition layer (``outcommit.factory`` sets ``Committer.components``), so the protocol
    never looks anything up in the plugin registry itself. Picklable: a magic filesystem
    sent to another process takes it along."""

    def check_store(self, url: str) -> None:
        """Raise :class:`~outcommit.errors.UnknownSchemeError` when no installed store serves ``url``."""

    def open_store(self, url: str, config: Config) -> Store:
        """The store of ``url`` (another than the destination's: the summary report directory)."""

    def create_committer(self, destination: str, config: Mapping[str, str], name: str) -> Committer:
        """Committer ``name`` for ``destination``, made again (in another process)."""


class Committer(JobRecovery):
    """Base of every committer: one instance is bound to one destination.

    Subclasses implement the protocol calls; the base class holds the destination,
    the store, configuration and the shared helpers (conflict modes, _SUCCESS, logging).
    """

    name: ClassVar[str] = ""
    #: Store capabilities this committer needs to be safe.
    requires: ClassVar[tuple[str, ...]] = ()
    #: The schemes of the only stores it is made for (core's ``memmp-magic``: ``memmp``);
    #: empty: any store with the capabilities it requires.
    made_for: ClassVar[tuple[str, ...]] = ()
    #: What the committer itself guarantees (task-commit.repeatable, ...).
    capabilities: ClassVar[Capabilities] = Capabilities()
    #: Conflict mode when none is configured.
    default_conflict_mode: ClassVar[str] = "append"
    #: The installed stores and committers (set by the factory; None when made directly).
    components: Components | None = None

    def __init__(self, destination: str, store: Store, config: Config | None = None) -> None:
        self.destination = destination
        self.store = store
        self.config = config or store.config
        self.dest = store.strip(destination)
        self._check_destination()
        #: Why this committer was chosen (set by the factory).
        self.selection = "constructed directly"
        # As many requests in flight as the store's connection pool serves.
        self.threads = self.config.get_int(THREADS_KEY, store.parallelism, minimum=1)
        self.conflict_mode = self.config.get_choice(CONFLICT_KEY, CONFLICT_MODES, self.default_conflict_mode)
        #: Where the conflict mode came from, as its user spelled it (the key, with its
        #: prefix, or an engine's reason: "save mode overwrite"): logged at job setup and in
        #: ``_SUCCESS``. An engine that decides the mode itself sets it (as ``selection``).
        self.conflict_source = (self.config.spelled(CONFLICT_KEY) if self.config.get_str(CONFLICT_KEY)
                                else f"the default of {self.name}")
        self._check_job_commit_settings()
        # Read by the staging committers only; a bad value fails wherever it is set.
        self.config.get_bool("outcommit.committer.unique-filenames", True)
        self._engine_metrics: dict[str, int] = {}
        self._io_baseline: dict[str, int] = {}

    def _check_destination(self) -> None:
        """Refuse a destination whose path is not the place it seems to name: a job
        deletes there ('replace', abort), so the root of a filesystem (``file:///``,
        ``hdfs://nn/``) or a path through ``.`` or ``..`` (``file:///tmp/..``: ``/``) is
        never one."""
        parts = self.dest.split("/")
        if any(part in (".", "..") for part in parts):
            raise ConfigError(f"destination {self.destination!r} has a '.' or '..' path "
                              "component: name the directory itself")
        if not self.dest.strip("/"):
            raise ConfigError(f"destination {self.destination!r} is the root of its filesystem: "
                              "name a directory to write into")

    def _check_job_commit_settings(self) -> None:
        """Read now the settings first used at job commit: a bad value must fail before any
        task runs, not once the work is done (and, for ``v2``, already visible)."""
        self.success_enabled()
        RetryPolicy.from_config(self.config)
        self.config.get_int(progress.INTERVAL_KEY, 10, minimum=0)
        self.config.get_bool(progress.BAR_KEY, False)

    def check_summary_report_dir(self) -> None:
        """At job setup: a summary report directory no installed plugin serves fails the
        job before any task runs. Not when the committer is made: executors, aborts and
        cleanups never write the report, and must not need its plugin."""
        report_dir = self.summary_report_dir()
        if report_dir:
            self.installed("a summary report directory").check_store(report_dir)

    def installed(self, needed_by: str) -> Components:
        """:attr:`components`, or a :class:`ConfigError` naming the fix when the committer
        was made without them (directly, not by ``outcommit.create_committer``)."""
        if self.components is None:
            raise ConfigError(f"{needed_by} needs the installed stores, which {self!r} was made "
                              "without: make it with outcommit.create_committer (or set its "
                              "components)")
        return self.components

    # -- capabilities ------------------------------------------------------------
    def has_capability(self, name: str) -> bool:
        return self.capabilities.has_capability(name)

    # -- protocol ----------------------------------------------------------------
    def setup_job(self, job: JobContext) -> None:
        raise NotImplementedError

    def setup_task(self, task: TaskAttemptContext) -> None:
        raise NotImplementedError

    def work_path(self, task: TaskAttemptContext) -> str:
        """Where the task writes, as a path of ``filesystem(task)``."""
        raise NotImplementedError

    def filesystem(self, task: TaskAttemptContext) -> fsspec.AbstractFileSystem:
        """The fsspec filesystem the task writes through."""
        return self.store.fs

    def needs_task_commit(self, task: TaskAttemptContext) -> bool:
        raise NotImplementedError

    def commit_task(self, task: TaskAttemptContext) -> dict[str, Any]:
        raise NotImplementedError

    def abort_task(self, task: TaskAttemptContext) -> None:
        raise NotImplementedError

    def commit_job(self, job: JobContext,
                   messages: Sequence[Mapping[str, Any]] | None = None) -> SuccessData:
        raise NotImplementedError

    def abort_job(self, job: JobContext) -> None:
        raise NotImplementedError

    def cleanup_job(self, job: JobContext) -> None:
        raise NotImplementedError

    def leftover_jobs(self) -> dict[str, list[int]]:
        """Jobs whose temporary state is on the store, by job id: the attempts found
        (``outcommit jobs``: what an interrupted or failed abort left for another)."""
        return {}

    def cleanup_committed_job(self, job: JobContext) -> None:
        """``cleanup_job`` of a job that an engine's own commit point says committed
        (a streaming batch log without ``_SUCCESS``): its state goes, whatever it shows
        of a job commit that began (``cleanup_job`` would keep that as evidence)."""
        self.cleanup_job(job)

    def recover_task(self, task: TaskAttemptContext) -> bool:
        """Recover a task committed by the previous job attempt. False: nothing to recover."""
        return False

    # -- shared helpers ------------------------------------------------------------
    def commit_started(self) -> float:
        """Call first in ``commit_job``: the monotonic start, and the store's request
        counters as they were, so ``_SUCCESS`` reports this job's requests only."""
        self._io_baseline = dict(self.store.iostatistics.snapshot()["counters"])
        return time.monotonic()

    def job_iostatistics(self, metrics: Mapping[str, int]) -> dict[str, Any]:
        """This job commit's statistics under Hadoop's names: the committer's, from its
        metrics, and the store's requests since ``commit_started``."""
        committer = IOStatistics()
        for name, key in ((iostats.TASKS_COMPLETED, "tasks.committed"),
                          (iostats.COMMITS_COMPLETED, "files.committed"),
                          (iostats.BYTES_COMMITTED, "bytes.committed"),
                          (iostats.OP_RENAME, "files.renamed"),
                          (iostats.THROTTLED, "store.throttled"),
                          (iostats.COMMITS_ABORTED, "uploads.aborted.other")):
            if metrics.get(key):
                committer.add(name, int(metrics[key]))
        if "commit.duration.ms" in metrics:
            committer.duration(iostats.COMMIT_JOB, metrics["commit.duration.ms"])
        store_now = self.store.iostatistics.snapshot()
        requests = {name: value - self._io_baseline.get(name, 0)
                    for name, value in store_now["counters"].items()
                    if value - self._io_baseline.get(name, 0)}
        return merge_snapshots(committer.snapshot(), {"counters": requests})

    def add_metrics(self, metrics: Mapping[str, int]) -> None:
        """Engine statistics (rows/bytes/files written...) to include in the _SUCCESS metrics."""
        for key, value in metrics.items():
            self._engine_metrics[key] = self._engine_metrics.get(key, 0) + int(value)

    def logger(self, job: JobContext | TaskAttemptContext) -> JobLogger:
        fields = {"job_id": job.job_id, "committer": self.name, "destination": self.destination}
        if isinstance(job, TaskAttemptContext):
            fields["task_attempt_id"] = job.attempt_id
        return JobLogger(logging.getLogger(f"outcommit.committer.{self.name}"), fields)

    def work_url(self, task: TaskAttemptContext) -> str:
        return self.store.url(self.work_path(task))

    def dest_path(self, relative: str) -> str:
        """The destination path of a relative output path, refusing anything outside."""
        full = posixpath.normpath(posixpath.join(self.dest, relative))
        relative_to(full, self.dest)  # raises ContainmentError for '..' and absolute paths
        return full

    def check_destination_free(self, paths: Iterable[str] | None = None) -> None:
        """Conflict mode ``fail``: refuse when the destination (or ``paths``) hold data."""
        if self.conflict_mode == "fail":
            conflictmodes.refuse_data(self.store, self.dest, self.destination, paths)

    def check_destination_free_of_others(self, job: JobContext) -> None:
        """:meth:`check_destination_free`, except that the output of this job's finished
        commit (its ``_SUCCESS`` says so) is no conflict: a later attempt meets it."""
        try:
            self.check_destination_free()
        except DestinationExistsError:
            if self.own_success(job) is None:
                raise

    def replace_destination(self, job: JobContext) -> int:
        """Conflict mode ``replace``: delete the destination's data, what readers see
        (:func:`.conflictmodes.replace`); the entries deleted."""
        removed = conflictmodes.replace(self.store, self.dest, self.threads)
        if removed:
            self.logger(job).info("replace: deleted %d entries of %s", removed, self.destination)
        return removed

    def remove_temporary_root(self) -> None:
        """Remove ``<dest>/_temporary`` if no job is using it any more (never its contents)."""
        self.store.delete_empty_dir(self.store.join(self.dest, TEMPORARY_DIR))

    def success_enabled(self) -> bool:
        return self.config.get_bool("outcommit.success.enabled", True)

    def log_setup(self, job: JobContext, where: str) -> None:
        """The one INFO line of job setup: where, which committer and why, which conflict
        mode and what set it."""
        self.logger(job).info("set up job attempt %d in %s: committer %s (%s), conflict mode %s (%s)",
                              job.attempt, where, self.name, self.selection, self.conflict_mode,
                              self.conflict_source)

    def diagnostics(self) -> dict[str, str]:
        """What ``_SUCCESS`` says of the choices behind the job (Hadoop's diagnostics map)."""
        return {"destination": self.destination, "selection": self.selection,
                "conflict-mode": self.conflict_mode, "conflict-mode.source": self.conflict_source}

    def write_success(self, job: JobContext, files: Iterable[str],
                      metrics: Mapping[str, int] | None = None,
                      diagnostics: Mapping[str, str] | None = None) -> SuccessData:
        """Write the report (the job commit's point of no return) and log the commit: one
        INFO line with the counts; the metrics and diagnostics at DEBUG."""
        all_metrics = {**self._engine_metrics, **(metrics or {})}
        summary = SuccessData.build(
            committer=self.name, job_id=job.job_id, job_id_source=job.job_id_source,
            files=files, metrics=all_metrics, diagnostics={**self.diagnostics(), **(diagnostics or {})},
            description=f"Job commit of {job.job_id} attempt {job.attempt} by {self.name}")
        summary.iostatistics = self.job_iostatistics(summary.metrics)
        summary.iostatistics["counters"][iostats.JOBS_COMPLETED] = 1
        if self.success_enabled():
            try:
                self.store.save_json(self.store.join(self.dest, SUCCESS_FILE), summary.to_dict())
            except Exception:
                # A write that took effect and then failed (a lost response): the commit
                # point is passed, and failing the job now would make its engine retry a
                # committed job. The store's evidence decides, as for renames.
                if self.own_success(job) is None:
                    raise
                self.logger(job).warning("writing _SUCCESS reported a failure, but it is there: "
                                         "the job committed", exc_info=True)
        self.save_summary_report(job, summary)
        log = self.logger(job)
        counts = summary.metrics
        size = counts.get("bytes.committed", counts.get("bytes.written"))
        log.info("committed job to %s: %d files%s from %d tasks in %.1f s", self.destination,
                 counts.get("files.committed", len(summary.filenames)),
                 f", {size} bytes" if size is not None else "", counts.get("tasks.committed", 0),
                 counts.get("commit.duration.ms", 0) / 1000)
        log.debug("_SUCCESS metrics %s; diagnostics %s", summary.metrics, summary.diagnostics)
        return summary

    def own_success(self, job: JobContext) -> SuccessData | None:
        """The destination's ``_SUCCESS`` if it reports this job's successful commit.

        ``_SUCCESS`` is written after the last file of the job is visible: it is the job
        commit's point of no return. A driver that dies after it, while it deletes the
        job's temporary state, leaves a committed job: an abort then only cleans up, and
        a later attempt of the job meets its own output. Read only on those rare paths;
        None where ``_SUCCESS`` is disabled (there is no commit point to find). Another
        job's ``_SUCCESS`` written over this one's hides it (docs/protocol.md).
        """
        if not self.success_enabled():
            return None
        try:
            report = load_success(self.store, self.store.join(self.dest, SUCCESS_FILE))
        except (FileNotFoundError, CorruptFileError):
            return None
        return report if report.success is True and report.jobId == job.job_id else None

    def abort_preview(self, job: JobContext) -> AbortPreview:
        """What aborting ``job`` would remove, read from the store and changing nothing
        (``outcommit jobs abort --dry-run``): its state's files; the destination files its
        interrupted commit published, as its state proves them (none once its ``_SUCCESS``
        says it committed: that output stays); its own pending uploads."""
        evidence = self.job_evidence(job)
        state = [] if evidence is None else [evidence.store.url(f.path)
                                             for f in evidence.store.list_files(evidence.root)]
        published = [] if self.own_success(job) is not None else self.published_by_interrupted_commit(job)
        return AbortPreview(state, [self.store.url(p) for p in published], self.own_pending_uploads(job))

    def published_by_interrupted_commit(self, job: JobContext) -> list[str]:
        """Destination files (store paths) an interrupted commit of ``job`` published, which
        its abort deletes; read-only. None known here (a committer that keeps no record)."""
        return []

    def own_pending_uploads(self, job: JobContext) -> list[str]:
        """The job's own pending uploads, which its abort aborts (``url upload-id``); read-only."""
        return []

    def summary_report_dir(self) -> str | None:
        """Where to save every job's summary report (``outcommit.summary-report-dir``)."""
        return self.config.get_str("outcommit.summary-report-dir")

    def save_summary_report(self, job: JobContext, summary: SuccessData) -> None:
        """Save the report to the summary report directory if one is set (also on failure)."""
        report_dir = self.summary_report_dir()
        if not report_dir:
            return
        try:
            store = self.installed("a summary report directory").open_store(report_dir, self.config)
            path = store.join(store.strip(report_dir), f"summary-{job.job_id}-{job.attempt}.json")
            store.save_json(path, summary.to_dict())
        except Exception:  # the report must never hide the commit's own outcome
            self.logger(job).warning("could not save summary report to %s", report_dir,
                                     exc_info=True)

    def failed_commit(self, job: JobContext, exc: BaseException, started: float,
                      files: Iterable[str] = (),
                      metrics: Mapping[str, int] | None = None) -> JobCommitError:
        """Build the success=false report for a failed job commit and the error to raise."""
        summary = SuccessData.build(
            committer=self.name, job_id=job.job_id, job_id_source=job.job_id_source,
            files=files, metrics={**(metrics or {}),
                                  "commit.duration.ms": int((time.monotonic() - started) * 1000)},
            diagnostics={**self.diagnostics(), "exception": f"{type(exc).__name__}: {exc}"},
            success=False, description=f"Failed job commit of {job.job_id} by {self.name}")
        summary.iostatistics = self.job_iostatistics(summary.metrics)
        summary.iostatistics["counters"]["committer_jobs_failed"] = 1
        self.save_summary_report(job, summary)
        self.logger(job).error("job commit failed: %s", exc)
        return JobCommitError(f"job commit of {job.job_id} to {self.destination} failed: {exc}",
                              summary)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} -> {self.destination}>"


@dataclass(frozen=True)
class AbortPreview:
    """What an abort of a job would remove (``Committer.abort_preview``), as URLs."""

    state: list[str]       # the files of the job's temporary state
    published: list[str]   # destination files its interrupted commit published
    uploads: list[str]     # its own pending uploads: "url upload-id"



@dataclass(frozen=True)
class CommitterSpec:
    """How a plugin registers a committer."""

    name: str
    factory: Callable[[str, Store, Config], Committer]
    requires: tuple[str, ...]
    capabilities: Capabilities
    description: str = ""
    plugin: str = ""
    config_keys: Mapping[str, str] = field(default_factory=dict)
    made_for: tuple[str, ...] = ()

    def safe_on(self, store: Store, scheme: str) -> bool:
        """Made for the store's scheme, which has every capability it requires."""
        return (not self.made_for or scheme in self.made_for) \
            and not store.capabilities.missing(self.requires)

    @classmethod
    def for_class(cls, committer: type[Committer], description: str = "",
                  config_keys: Mapping[str, str] | None = None) -> CommitterSpec:
        return cls(name=committer.name, factory=committer, requires=committer.requires,
                   capabilities=committer.capabilities,
                   description=description or (committer.__doc__ or "").strip().splitlines()[0],
                   config_keys=dict(config_keys or {}), made_for=committer.made_for)


__all__ = ["ABORT_NOTE", "JOB_MARKER", "TEMPORARY_DIR", "AbortPreview", "Committer", "CommitterSpec",
           "JobEvidence", "attempts_in", "caps", "is_hidden", "is_inside", "relative_to"]
