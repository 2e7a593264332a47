"""The committer protocol and the base class every committer builds on.

``Committer`` holds the lifecycle (setup, commit and abort of jobs and tasks), what a
committer needs (``requires``, ``made_for``) and how a plugin registers one
(:class:`CommitterSpec`). What every committer shares beyond that lives beside it, in
helpers it calls: the report (:mod:`.reporting`, the object ``committer.reports``), the
conflict modes (:mod:`.conflictmodes`, functions of the committer), recovery and what
``outcommit jobs`` reads (:mod:`.recovery`, the object ``committer.recovery``, from the
job state the committer's family keeps).
"""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

import fsspec

from . import capabilities as caps
from . import conflictmodes, progress
from .capabilities import Capabilities
from .config import Config
from .context import JobContext, TaskAttemptContext
from .errors import ConfigError
from .jobstate import ABORT_NOTE, JOB_MARKER, JobEvidence, attempts_in
from .paths import is_hidden, is_inside, relative_to
from .recovery import AbortPreview, JobRecovery
from .reporting import JobReports
from .retry import RetryPolicy
from .store import Store
from .success import SuccessData

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


class Committer:
    """Base of every committer: one instance is bound to one destination.

    Subclasses implement the protocol calls; the base class holds the destination, the
    store, configuration and logging. What every committer shares are helpers it calls:
    ``reports`` (``_SUCCESS``, the summary report), ``recovery`` (abort notes, repeated
    and interrupted commits, ``outcommit jobs``) and the conflict modes' functions
    (:mod:`.conflictmodes`).
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
        #: ``_SUCCESS``, the summary report and their statistics (a family reporting
        #: differently installs its own after this).
        self.reports = JobReports(self)
        #: What the job's state tells after a failure; a family keeping job state
        #: installs one reading it (the default: a committer that keeps none).
        self.recovery = JobRecovery(self)
        self._check_job_commit_settings()
        # Read by the staging committers only; a bad value fails wherever it is set.
        self.config.get_bool("outcommit.committer.unique-filenames", True)

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
        self.reports.success_enabled()
        RetryPolicy.from_config(self.config)
        self.config.get_int(progress.INTERVAL_KEY, 10, minimum=0)
        self.config.get_bool(progress.BAR_KEY, False)

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

    def recover_task(self, task: TaskAttemptContext) -> bool:
        """Recover a task committed by the previous job attempt. False: nothing to recover."""
        return False

    # -- shared helpers ------------------------------------------------------------
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

    def remove_temporary_root(self) -> None:
        """Remove ``<dest>/_temporary`` if no job is using it any more (never its contents)."""
        self.store.delete_empty_dir(self.store.join(self.dest, TEMPORARY_DIR))

    def log_setup(self, job: JobContext, where: str) -> None:
        """The one INFO line of job setup: where, which committer and why, which conflict
        mode and what set it."""
        self.logger(job).info("set up job attempt %d in %s: committer %s (%s), conflict mode %s (%s)",
                              job.attempt, where, self.name, self.selection, self.conflict_mode,
                              self.conflict_source)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} -> {self.destination}>"


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
