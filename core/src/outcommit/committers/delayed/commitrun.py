"""One run of the delayed family's job commit, as its stages (:mod:`.jobcommit`) see it:
what they use of the committer (:class:`Committing`) and what all of them share
(:class:`JobCommit`: the job, its layout, its log, when the commit began).

Its own module because it is the contract between ``DelayedCompletionCommitter`` and its
job commit, apart from what the stages do: a stage that needs more of the committer says
so here, and the stages' module holds only the stages, in order.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from outcommit.config import Config
from outcommit.context import JobContext
from outcommit.errors import CommitError, CorruptCommitDataError, CorruptFileError, JobCommitError
from outcommit.multipart import MultipartUploads
from outcommit.reporting import JobReports
from outcommit.store import Store

from . import cleanup, conflicts, fanout
from .files import Expectations
from .layout import JobLayout
from .operations import Logger
from .pendingsets import JobCommits
from .sweep import Sweep


class Committing(cleanup.Ending, fanout.FanningOut, Protocol):
    """What the stages use of the committer whose job they commit
    (``DelayedCompletionCommitter``): named here, so this module needs not import it."""

    store: Store
    dest: str
    mp: MultipartUploads
    config: Config
    threads: int
    conflict_mode: str
    reports: JobReports

    @property
    def meta(self) -> Store: ...
    @property
    def conflict_scope(self) -> conflicts.Scope: ...
    @property
    def exclusive_completion(self) -> bool: ...
    @property
    def abort_pending_key(self) -> str: ...
    @property
    def sweep_scope_key(self) -> str: ...

    def require_job(self, job: JobContext, error: type[CommitError]) -> None: ...
    def sweep(self, job: JobContext, running: AbstractSet[tuple[str, str]] = frozenset(),
              started: datetime | None = None) -> Sweep: ...


@dataclass(frozen=True)
class JobCommit:
    """What every stage of one job commit shares."""

    committer: Committing
    job: JobContext
    log: Logger
    layout: JobLayout
    expect: Expectations
    started: float  # time.monotonic() when the commit began: its duration in the report

    @classmethod
    def of(cls, committer: Committing, job: JobContext, started: float) -> JobCommit:
        return cls(committer, job, committer.logger(job), committer.layout(job),
                   committer.expectations(job), started)

    def failed(self, exc: Exception, commits: JobCommits | None) -> JobCommitError:
        """The error a failed job commit raises, with its success=false report."""
        store = self.committer.store
        failed = self.committer.reports.failed_commit(self.job, exc, self.started,
                                              (store.url(c.path) for c in commits or ()))
        if isinstance(exc, CorruptFileError):
            return CorruptCommitDataError(str(failed), failed.summary, exc)
        return failed
