"""The engine model: drive committers the way outcommit's engines do.

Two flows (``Engine.flow``):

* ``spark`` — the PySpark data source. Spark's commit coordinator cannot be asked
  before a Python task commits, so a committer declaring ``task-commit.isolated``
  (committing is harmless for other attempts) is committed by *every* finished attempt
  on its executor, and the driver passes only the accepted attempts' messages to
  ``commit_job``; any other committer is committed by the *driver*, for the accepted
  attempt only.
* ``hadoop`` — MapReduce: an attempt asks the driver for permission (the first asker
  wins), commits on its executor, and ``commit_job`` runs without messages (discovery).
  A permitted attempt lost in or after its commit is retried only when the committer
  declares ``task-commit.repeatable``; otherwise the engine fails the job
  (docs/protocol.md, engines' duty 3).

Each attempt has its own committer instance (its own executor); the driver has one. A
dead attempt simply stops: it never cleans up, as a killed process would not, and a
file it had open stays open (kept referenced until the cell is over, so no finaliser
runs the cleanup a killed process could not run).
"""

from __future__ import annotations

import itertools
import posixpath
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from outcommit import capabilities as caps
from outcommit.committer import Committer
from outcommit.context import JobContext
from outcommit.errors import CommitError
from outcommit.factory import create_committer
from outcommit.store import Store
from outcommit.success import SuccessData

from .bindings import Binding
from .oracles import visible
from .scenarios import Flow

Files = dict[str, bytes]
CONFLICT_MODE_KEY = "outcommit.committer.conflict-mode"
TASKS = 2  # tasks per job: enough for a job commit with several publishing steps


class EngineFailure(CommitError):
    """The engine gave up on the job (a rule of docs/protocol.md, not a committer error)."""


class HarnessError(Exception):
    """The harness could not produce the situation it wanted: the cell proves nothing."""


class DriverKilled(CommitError):
    """The driver process died; the job never finished (the cell's loud failure)."""


def as_named(rel: str) -> str:
    """The files' default names: as :func:`task_files` gives them."""
    return rel


@dataclass
class CellEnv:
    """Everything one cell's actors share: the binding, the committer name, the store."""

    binding: Binding
    committer: str
    root: str
    dest: str
    config: dict[str, str]
    store: Store
    local_dir: str
    #: Open files of dead attempts, kept referenced until the cell's verdict.
    graveyard: list[Any] = field(default_factory=list)
    #: Files of every attempt that reached task commit, by destination-relative name.
    written: dict[str, set[bytes]] = field(default_factory=dict)
    #: What the main destination held before the job.
    existing: Files = field(default_factory=dict)
    #: Containers the scenario created (bucket-root), removed after the verdict.
    extra_roots: list[str] = field(default_factory=list)
    #: How the cell names each file a job writes (a relative path from :func:`task_files`).
    rename: Callable[[str], str] = as_named

    def make(self, destination: str | None = None, store: Store | None = None) -> Committer:
        """A new committer instance: a new executor or driver process would create one."""
        return create_committer(destination or self.dest, self.config, self.committer,
                                store=store or self.store)

    @property
    def mode(self) -> str:
        """The conflict mode of every job of the cell."""
        return self.config.get(CONFLICT_MODE_KEY, "append")

    def visible(self, url: str) -> Files:
        return visible(self.store, self.store.strip(url))

    def bury(self) -> None:
        """After the verdict: let the dead attempts' files go without their close() acting."""
        for handle in self.graveyard:
            try:
                handle.closed = True  # fsspec buffered files: no flush, no upload on collection
            except (AttributeError, ValueError):
                pass
        self.graveyard.clear()


def task_file_names(label: str, index: int) -> list[str]:
    """The names every attempt of task ``index`` writes: one file at the top level and one
    in ``sub/``, a directory every task writes into, so rename committers merge into an
    existing directory and partitioned ones see two partitions."""
    base = f"{label}part-{index:05d}"
    return [f"{base}-0.txt", f"sub/{base}.txt"]


def task_files(label: str, job: JobContext, index: int, attempt: int) -> Files:
    """What one attempt writes: the names every attempt of the task uses, its own bytes."""
    tag = f"{label}job {job.job_id[:8]}.{job.attempt} task {index} attempt {attempt}"
    top, sub = task_file_names(label, index)
    return {top: f"{tag} file 0\n".encode(), sub: f"{tag} file sub\n".encode()}


class Attempt:
    """One task attempt on its own executor (its own committer instance)."""

    def __init__(self, env: CellEnv, job: JobContext, index: int, attempt: int, label: str = "",
                 store: Store | None = None) -> None:
        self.env = env
        self.committer = env.make(job.destination, store)
        self.task = job.task_attempt(index, attempt)
        self.files = {env.rename(rel): data for rel, data in task_files(label, job, index, attempt).items()}
        self.written: Files = {}
        self.commit_started = False
        self.dest_prefix = _relative_prefix(env.dest, job.destination)

    @property
    def index(self) -> int:
        return self.task.index

    def setup(self) -> None:
        self.committer.setup_task(self.task)

    def write(self, files: Mapping[str, bytes] | None = None) -> None:
        fs, base = self.committer.filesystem(self.task), self.committer.work_path(self.task)
        for rel, data in (files or self.files).items():
            with fs.open(posixpath.join(base, rel), "wb") as handle:
                handle.write(data)
            self.written[rel] = data

    def write_partial(self) -> None:
        """Write the first file, then die inside the next: some bytes flushed, never closed.

        On a multipart store the partial file is larger than a part, so a part really is
        uploaded (a pending upload that no file records).
        """
        first = dict(itertools.islice(self.files.items(), 1))
        self.write(first)
        rel = list(self.files)[1]
        fs, base = self.committer.filesystem(self.task), self.committer.work_path(self.task)
        handle = fs.open(posixpath.join(base, rel), "wb")
        handle.write(b"p" * (self.env.binding.multipart_part_size + 4096))
        handle.flush()
        self.env.graveyard.append(handle)

    def note_commit(self) -> None:
        """From here on this attempt's files may legitimately appear (v2 publishes at task commit)."""
        self.commit_started = True
        for rel, data in self.written.items():
            self.env.written.setdefault(self.dest_prefix + rel, set()).add(data)

    def commit(self) -> dict[str, Any]:
        self.note_commit()
        return self.committer.commit_task(self.task)

    def abort(self) -> None:
        self.committer.abort_task(self.task)


def _relative_prefix(main: str, dest: str) -> str:
    """``dest`` relative to the cell's main destination, as a prefix ('' for itself)."""
    if dest.rstrip("/") == main.rstrip("/"):
        return ""
    return dest.rstrip("/")[len(main.rstrip("/")) + 1:] + "/" if dest.startswith(main + "/") else ""


def job_context(destination: str, config: Any, flow: Flow) -> JobContext:
    """The job as the flow's engine declares it: the PySpark data source commits with its
    tasks' messages (``task_messages``: no claims), MapReduce by discovery."""
    return JobContext(destination, config=config, task_messages=flow == "spark")


class Engine:
    """The driver of one job attempt: its committer, the commit coordinator, the messages."""

    def __init__(self, env: CellEnv, job: JobContext, flow: Flow, label: str = "",
                 store: Store | None = None) -> None:
        self.env = env
        self.job = job
        self.flow = flow
        self.label = label
        self.store = store
        self.committer = env.make(job.destination, store)
        self.isolated = self.committer.has_capability(caps.TASK_COMMIT_ISOLATED)
        self.accepted: dict[int, Attempt] = {}
        self.messages: dict[int, dict[str, Any]] = {}
        #: Acceptable outputs per task: one, or two when either committed attempt may win.
        self.outputs: dict[int, list[Files]] = {}

    # -- tasks ----------------------------------------------------------------------------
    def attempt(self, index: int, attempt: int = 0) -> Attempt:
        return Attempt(self.env, self.job, index, attempt, self.label, self.store)

    def run_task(self, index: int, attempt: int = 0) -> Attempt:
        """A healthy attempt: setup, write, finish."""
        a = self.attempt(index, attempt)
        a.setup()
        a.write()
        self.finish(a)
        return a

    def run_all(self, skip: Sequence[int] = ()) -> None:
        for index in range(TASKS):
            if index not in skip:
                self.run_task(index)

    def finish(self, a: Attempt) -> bool:
        """The attempt finished writing: commit it as the flow says. False: it was refused."""
        if self.executor_commits_unasked():
            return self.receive(a, a.commit())
        if a.index in self.accepted:  # the coordinator refuses: another attempt committed
            a.abort()
            return False
        self.accepted[a.index] = a
        message = self.commit_on_driver(a) if self.flow == "spark" else a.commit()
        self._record(a, message)
        return True

    def executor_commits_unasked(self) -> bool:
        return self.flow == "spark" and self.isolated

    def receive(self, a: Attempt, message: dict[str, Any]) -> bool:
        """A message from an executor; a task already accepted keeps its first attempt."""
        if a.index in self.accepted:
            return False
        self.accepted[a.index] = a
        self._record(a, message)
        return True

    def commit_on_driver(self, a: Attempt) -> dict[str, Any]:
        a.note_commit()
        return self.committer.commit_task(a.task)

    def _record(self, a: Attempt, message: dict[str, Any]) -> None:
        self.messages[a.index] = message
        self.outputs.setdefault(a.index, []).append(dict(a.written))

    def permitted_attempt_lost(self, index: int) -> None:
        """A permitted attempt died in or after its commit: retry it, or fail the job."""
        if not self.committer.has_capability(caps.TASK_COMMIT_REPEATABLE):
            raise EngineFailure(
                f"task {index}: the outcome of its task commit is unknown and {self.committer.name} "
                "task commit is not repeatable (task-commit.repeatable): failing the job")
        self.accepted.pop(index, None)

    # -- job ----------------------------------------------------------------------------------
    def commit_job(self) -> SuccessData:
        if self.flow == "spark":
            return self.committer.commit_job(self.job, [self.messages[i] for i in sorted(self.messages)])
        return self.committer.commit_job(self.job)

    def abort(self) -> None:
        self.committer.abort_job(self.job)
        self.committer.cleanup_job(self.job)

    def spark_messages(self) -> list[dict[str, Any]]:
        return [self.messages[i] for i in sorted(self.messages)]

    def expected_outputs(self) -> list[Files]:
        """Every acceptable job output: one committed attempt per task."""
        per_task = [self.outputs[i] for i in sorted(self.outputs)]
        combos: list[Files] = []
        for choice in itertools.product(*per_task):
            merged: Files = {}
            for files in choice:
                merged.update(files)
            combos.append(merged)
        return combos or [{}]
