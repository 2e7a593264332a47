"""The processes of the batch machine: drivers and task attempts, each with its own store
handle that can be killed, and what the machine remembers of each.

A real process dies between two of its requests. :class:`ActorStore` wraps the example's
store (every request really runs) and, once told :meth:`~ActorStore.die_after` ``k``
requests, raises :class:`ProcessDied` instead of the next one and every one after it:
nothing the process would have done after its death reaches the store, from any of its
threads. ``ProcessDied`` is a ``BaseException``: no ``except Exception`` handler of the
committer runs on it, as none would in a killed process (``finally`` blocks do, and their
requests die too).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from outcommit.committer import Committer
from outcommit.context import JobContext, TaskAttemptContext
from outcommit.errors import InjectedFault
from outcommit.testing.faults import FaultInjectingStore


class ProcessDied(BaseException):
    """The process making this request was killed (:class:`ActorStore`)."""


class ActorStore(FaultInjectingStore):
    """One process's handle on the example's store: it can die, or fail one request."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner, [])
        self.left: int | None = None  # requests before death; None: not dying
        self.fail_at: int | None = None  # the request that fails once (InjectedFault)
        self.requests = 0

    def die_after(self, requests: int) -> None:
        with self._lock:
            self.left = requests

    def kill(self) -> None:
        self.die_after(0)

    def fail_once_after(self, requests: int) -> None:
        with self._lock:
            self.fail_at = self.requests + requests + 1

    @property
    def dead(self) -> bool:
        return self.left is not None and self.left <= 0

    def call(self, operation: str, target: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            if self.left is not None:
                if self.left <= 0:
                    raise ProcessDied(f"killed before {operation}")
                self.left -= 1
            self.requests += 1
            failing = self.requests == self.fail_at
        if failing:  # a store error the committer sees and handles (it is not a death)
            raise InjectedFault(f"injected failure of {operation} (request {self.requests})")
        return target(*args, **kwargs)


@dataclass(eq=False)
class Attempt:
    """One task attempt: its executor's committer and what it wrote."""

    key: str
    job: Job
    ctx: TaskAttemptContext
    committer: Committer
    store: ActorStore
    files: dict[str, bytes]  # destination-relative name -> its bytes, every file of the task
    written: int = 0  # files written so far (in order)
    #: running, committed, aborted, dead (killed: it never acts again)
    state: str = "running"

    @property
    def index(self) -> int:
        return self.ctx.index

    @property
    def fully_written(self) -> bool:
        return self.written == len(self.files)

    @property
    def current(self) -> bool:
        """Of the job's current attempt (a restarted driver's tasks are a new job attempt)."""
        return self.ctx.job.attempt == self.job.ctx.attempt


@dataclass(eq=False)
class Task:
    """One task of a job, as its driver sees it in the current job attempt."""

    index: int
    names: list[str]
    #: The attempt whose output is the task's (messages: the accepted one; discovery: the
    #: permitted one, once it committed), and its files.
    chosen: Attempt | None = None
    output: list[dict[str, bytes]] | None = None  # its acceptable outputs (None: not committed)
    message: dict[str, Any] | None = None  # messages flow: the accepted attempt's message
    #: discovery: the attempt allowed to commit (it may not have committed yet)
    permitted: Attempt | None = None
    #: discovery: the permitted attempt died in or after its commit: another may be permitted
    lost: bool = False
    #: outputs a job commit by a later job attempt may still find of a lost commit
    maybe: list[dict[str, bytes]] = field(default_factory=list)
    #: the attempts whose committed output the task's is or may be (never aborted by the engine)
    holders: list[Attempt] = field(default_factory=list)

    @property
    def done(self) -> bool:
        return self.output is not None and not self.lost


@dataclass(eq=False)
class Job:
    """One job (all its attempts), its driver and its tasks."""

    n: int
    ctx: JobContext
    dest: str  # relative to the example's root
    mode: str
    flow: str  # "messages" (Spark: commit_job with the messages) or "discovery" (Hadoop)
    config: dict[str, str]
    tasks: list[Task]
    driver: Committer | None = None
    driver_store: ActorStore | None = None
    #: live, committed, aborted
    status: str = "live"
    #: a job commit began and did not finish: its output may be partly visible
    commit_began: bool = False
    #: another job's replace may have deleted what that commit had published
    damaged: bool = False
    #: the job attempt whose commit began (a new process may commit that attempt again)
    began_attempt: int = -1
    #: committed, with its temporary state perhaps left (its driver died after _SUCCESS)
    leftover: bool = False
    #: committed, and its cleanup had deleted the record of that commit (journal, commit
    #: record) when a later attempt began: only its _SUCCESS still says it finished
    record_gone: bool = False
    #: why the engine can no longer commit it (it must abort it); "" while it can
    doomed: str = ""
    #: old data a replace of this job's first commit try meant to delete
    replace_targets: set[str] = field(default_factory=set)
    attempts: list[Attempt] = field(default_factory=list)

    @property
    def job_id(self) -> str:
        return self.ctx.job_id

    @property
    def names(self) -> list[str]:
        return [name for task in self.tasks for name in task.names]

    @property
    def ended(self) -> bool:
        return self.status in ("committed", "aborted")

    @property
    def active(self) -> bool:
        """Live, or committed with its state perhaps left: a driver may still act on it."""
        return self.status == "live" or (self.status == "committed" and self.leftover)

    @property
    def can_commit(self) -> bool:
        return (self.status == "live" and self.driver is not None and not self.doomed
                and all(task.done for task in self.tasks))

    def task_attempt(self, index: int, attempt: int) -> TaskAttemptContext:
        return self.ctx.task_attempt(index, attempt)


def messages_of(job: Job) -> list[dict[str, Any]]:
    return [task.message for task in job.tasks if task.message is not None]


def next_attempt_number(job: Job, index: int) -> int:
    return sum(1 for a in job.attempts if a.index == index and a.current)


__all__ = ["ActorStore", "Attempt", "Job", "JobContext", "ProcessDied", "Task", "messages_of",
           "next_attempt_number"]
