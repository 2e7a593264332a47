"""What a job commit reports: ``_SUCCESS`` (its point of no return) and its success=false
twin, the summary report saved beside them, and the statistics both carry.

:class:`JobReports` is an object each committer owns (``committer.reports``) and calls:
every committer reports the same way; one that reports differently installs a subclass
(the manifest committer's reads Hadoop's report directory first). Its own module because
the report is what a job commit leaves for readers and operators, apart from how the
commit publishes: which requests it counts, what it says of the choices behind the job,
and how a report that cannot be saved never hides the commit's outcome.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from . import iostats
from .config import Config
from .context import JobContext
from .errors import CorruptFileError, JobCommitError
from .iostats import IOStatistics, merge_snapshots
from .store import Store
from .success import SUCCESS_FILE, SuccessData, load_success


class ReportStores(Protocol):
    """What the report needs of the installed stores (``Committer.components``)."""

    def check_store(self, url: str) -> None: ...
    def open_store(self, url: str, config: Config) -> Store: ...


class Reported(Protocol):
    """What the report reads of the committer whose jobs it reports (``Committer``): read
    when a report is written, as an engine may set the conflict mode or selection late."""

    @property
    def name(self) -> str: ...
    @property
    def destination(self) -> str: ...
    @property
    def dest(self) -> str: ...
    @property
    def store(self) -> Store: ...
    @property
    def config(self) -> Config: ...
    @property
    def selection(self) -> str: ...
    @property
    def conflict_mode(self) -> str: ...
    @property
    def conflict_source(self) -> str: ...

    def logger(self, job: JobContext) -> logging.LoggerAdapter[Any]: ...
    def installed(self, needed_by: str) -> ReportStores: ...


class JobReports:
    """The reports of one committer's jobs: ``_SUCCESS``, the summary report, their
    statistics. Holds the engines' metrics and the store's request counters at the start
    of the job commit, the two things a report adds up."""

    def __init__(self, committer: Reported) -> None:
        self.committer = committer
        self._engine_metrics: dict[str, int] = {}
        self._io_baseline: dict[str, int] = {}

    @property
    def store(self) -> Store:
        return self.committer.store

    @property
    def config(self) -> Config:
        return self.committer.config

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

    def success_enabled(self) -> bool:
        return self.config.get_bool("outcommit.success.enabled", True)

    def diagnostics(self) -> dict[str, str]:
        """What ``_SUCCESS`` says of the choices behind the job (Hadoop's diagnostics map)."""
        c = self.committer
        return {"destination": c.destination, "selection": c.selection,
                "conflict-mode": c.conflict_mode, "conflict-mode.source": c.conflict_source}

    def write_success(self, job: JobContext, files: Iterable[str],
                      metrics: Mapping[str, int] | None = None,
                      diagnostics: Mapping[str, str] | None = None) -> SuccessData:
        """Write the report (the job commit's point of no return) and log the commit: one
        INFO line with the counts; the metrics and diagnostics at DEBUG."""
        all_metrics = {**self._engine_metrics, **(metrics or {})}
        summary = SuccessData.build(
            committer=self.committer.name, job_id=job.job_id, job_id_source=job.job_id_source,
            files=files, metrics=all_metrics, diagnostics={**self.diagnostics(), **(diagnostics or {})},
            description=f"Job commit of {job.job_id} attempt {job.attempt} by {self.committer.name}")
        summary.iostatistics = self.job_iostatistics(summary.metrics)
        summary.iostatistics["counters"][iostats.JOBS_COMPLETED] = 1
        if self.success_enabled():
            try:
                self.store.save_json(self.store.join(self.committer.dest, SUCCESS_FILE), summary.to_dict())
            except Exception:
                # A write that took effect and then failed (a lost response): the commit
                # point is passed, and failing the job now would make its engine retry a
                # committed job. The store's evidence decides, as for renames.
                if self.own_success(job) is None:
                    raise
                self.committer.logger(job).warning("writing _SUCCESS reported a failure, but it is there: "
                                         "the job committed", exc_info=True)
        self.save_summary_report(job, summary)
        log = self.committer.logger(job)
        counts = summary.metrics
        size = counts.get("bytes.committed", counts.get("bytes.written"))
        log.info("committed job to %s: %d files%s from %d tasks in %.1f s", self.committer.destination,
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
            report = load_success(self.store, self.store.join(self.committer.dest, SUCCESS_FILE))
        except (FileNotFoundError, CorruptFileError):
            return None
        return report if report.success is True and report.jobId == job.job_id else None

    def summary_report_dir(self) -> str | None:
        """Where to save every job's summary report (``outcommit.summary-report-dir``)."""
        return self.config.get_str("outcommit.summary-report-dir")

    def save_summary_report(self, job: JobContext, summary: SuccessData) -> None:
        """Save the report to the summary report directory if one is set (also on failure)."""
        report_dir = self.summary_report_dir()
        if not report_dir:
            return
        try:
            store = self.committer.installed("a summary report directory").open_store(report_dir, self.config)
            path = store.join(store.strip(report_dir), f"summary-{job.job_id}-{job.attempt}.json")
            store.save_json(path, summary.to_dict())
        except Exception:  # the report must never hide the commit's own outcome
            self.committer.logger(job).warning("could not save summary report to %s", report_dir,
                                     exc_info=True)

    def failed_commit(self, job: JobContext, exc: BaseException, started: float,
                      files: Iterable[str] = (),
                      metrics: Mapping[str, int] | None = None) -> JobCommitError:
        """Build the success=false report for a failed job commit and the error to raise."""
        summary = SuccessData.build(
            committer=self.committer.name, job_id=job.job_id, job_id_source=job.job_id_source,
            files=files, metrics={**(metrics or {}),
                                  "commit.duration.ms": int((time.monotonic() - started) * 1000)},
            diagnostics={**self.diagnostics(), "exception": f"{type(exc).__name__}: {exc}"},
            success=False, description=f"Failed job commit of {job.job_id} by {self.committer.name}")
        summary.iostatistics = self.job_iostatistics(summary.metrics)
        summary.iostatistics["counters"]["committer_jobs_failed"] = 1
        self.save_summary_report(job, summary)
        self.committer.logger(job).error("job commit failed: %s", exc)
        return JobCommitError(f"job commit of {job.job_id} to {self.committer.destination} failed: {exc}",
                              summary)

    def check_summary_report_dir(self) -> None:
        """At job setup: a summary report directory no installed plugin serves fails the
        job before any task runs. Not when the committer is made: executors, aborts and
        cleanups never write the report, and must not need its plugin."""
        report_dir = self.summary_report_dir()
        if report_dir:
            self.committer.installed("a summary report directory").check_store(report_dir)
