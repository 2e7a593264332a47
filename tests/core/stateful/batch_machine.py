"""A model-based test of the batch protocol: jobs, tasks, attempts, zombies, drivers that
die and come back, two jobs on one destination, adjacent and nested destinations, every
conflict mode (issue 27).

The rules are the real calls of docs/protocol.md on a real store, made the way engines
make them (the local engine and PySpark's data source commit with the tasks' messages;
Hadoop's flow asks the driver for permission and commits by discovery), and by the
processes that outlive their job: attempts still writing or committing after it ended, a
driver killed between two requests, an operator running ``outcommit jobs abort``. The
reference model (:mod:`batch_model`) decides, for every call, whether it must succeed or
fail loudly and what must be visible afterwards. The oracles are the correctness properties
of docs/protocol.md (#correctness-properties):

* complete, exclusive — after a job commit each task's output is exactly one of its
  acceptable attempts' (checked per task, and as ``outcommit.read.committed_files``);
* abortable — nothing of an aborted job stays visible (``v2``: what its tasks published
  stays, its documented limit);
* continuity — a task commit after its job ended fails, and no late write or commit ever
  becomes visible (the world check after every step);
* no leaks — right after a job commit or abort its temporary state is gone; at the end
  (every job ended, every attempt gone), nothing temporary, no pending upload and no
  local staging file is left under the example's root;
* containment — files outside the destinations (a canary in their parent, a sibling
  ``dataset1.bak``, a hidden file, a pending upload beside them) never change, and no
  file appears that the model does not know.

Every ``_SUCCESS`` is checked too: only a committed job's, naming exactly its files, each
of them there.
"""

from __future__ import annotations

import contextlib
import functools
import io
import posixpath
import shutil
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from batch_actors import ActorStore, Attempt, Job, ProcessDied, Task, next_attempt_number
from batch_commits import JobCommits
from batch_model import (
    CANARIES,
    CONFLICT_MODES,
    DESTINATIONS,
    HIDDEN_CANARY,
    PENDING_CANARY,
    SEEDS,
    TRAITS,
    World,
    attempt_bytes,
    task_names,
)
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from outcommit import cli
from outcommit.committer import Committer
from outcommit.context import JobContext
from outcommit.errors import CommitError
from outcommit.factory import create_committer, open_store
from outcommit.store import Store

MODE_KEY = "outcommit.committer.conflict-mode"
FLOWS = ("messages", "discovery")
MAX_JOBS = 4
MAX_ACTIVE_JOBS = 2
MAX_ATTEMPTS_PER_TASK = 3
PICK = st.integers(min_value=0, max_value=63)
#: Files per task, one entry per task of a job.
SIZES = st.lists(st.integers(0, 3), min_size=1, max_size=2)


@dataclass
class Binding:
    """Where a machine's examples run: a store, reached with ``config``, one fresh root per
    example (``new_root``), removed afterwards (``remove_root``)."""

    name: str
    new_root: Callable[[], str]
    config: dict[str, str]
    remove_root: Callable[[Store, str], None]
    local_dir: str | None = None  # the staging committers' local directory


@dataclass
class Tried:
    """What a machine's examples tried: every rule sequence, with and without its targets."""

    sequences: set[tuple[str, ...]] = field(default_factory=set)
    detailed: set[tuple[str, ...]] = field(default_factory=set)
    steps: Counter[str] = field(default_factory=Counter)
    examples: int = 0


def step(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Record the rule in the example's trace; a failing rule marks the example broken
    (its teardown then cleans up without checking)."""
    @functools.wraps(fn)
    def run(self: BatchProtocol, *args: Any, **kwargs: Any) -> Any:
        self.trace.append(fn.__name__)
        self.dirty = fn.__name__ != "rest"
        try:
            return fn(self, *args, **kwargs)
        except BaseException:
            self.broken = True
            raise
    return run


class BatchProtocol(JobCommits, RuleBasedStateMachine):
    """The machine; a subclass per committer and store binding sets the class attributes."""

    committer_name: ClassVar[str] = ""
    binding: ClassVar[Binding]
    tried: ClassVar[Tried]

    def __init__(self) -> None:
        super().__init__()
        self.traits = TRAITS[self.committer_name]
        self.config = dict(self.binding.config)
        self.local_dir = self.binding.local_dir
        self.root_url = self.binding.new_root()
        self.base = open_store(self.root_url, self.config)
        self.root = self.base.strip(self.root_url)
        self.world = World()
        #: per destination, the jobs whose _SUCCESS may be there (None: no _SUCCESS); None: unknown
        self.success: dict[str, set[str | None] | None] = {d: {None} for d in DESTINATIONS}
        self.success_names: dict[str, set[str]] = {}
        self.committed_jobs: set[str] = set()  # every job that committed, by id
        self.jobs: list[Job] = []
        self.trace: list[str] = []
        self.detail: list[str] = []
        self.broken = False
        self.hidden_canary: bytes | None = None
        self.dirty = True  # a step may have changed the store since the last check
        self._read_cache: dict[tuple[str, str, int], bytes] = {}
        self.pending_canary: str | None = None
        self._plant_canaries()

    # -- paths -----------------------------------------------------------------------------
    def make(self, job: Job) -> tuple[Committer, ActorStore]:
        """A new process's committer for the job's destination (its own store handle)."""
        store = ActorStore(self.base)
        return create_committer(self.url(job.dest), job.config, self.committer_name, store=store), store

    def _plant_canaries(self) -> None:
        for relative, data in CANARIES.items():
            self.base.write_bytes(self.path(relative), data)
            self.world.put(relative, data)
        self.base.write_bytes(self.path(HIDDEN_CANARY[0]), HIDDEN_CANARY[1])
        mp = self.base.multipart()
        if mp is not None and mp.abortable:
            self.pending_canary = mp.initiate(self.path(PENDING_CANARY))
            mp.upload_part(self.path(PENDING_CANARY), self.pending_canary, 1, b"pending canary")

    # -- what the store shows ----------------------------------------------------------------
    @invariant()
    def visible_output_is_the_models(self) -> None:
        if self.broken or not self.dirty:
            return
        self.dirty = False
        visible, successes, everything = self.observe()
        problems = self.world.violations(visible) + self.success_problems(successes, everything)
        hidden, data = HIDDEN_CANARY
        if self.hidden_canary != data:
            problems.append(f"the hidden file {hidden} outside every destination changed")
        if problems:
            self.broken = True
            raise self.violation("after " + " ".join(self.trace[-3:]) + ":\n  " + "\n  ".join(problems))

    # -- initial data ---------------------------------------------------------------------------
    @initialize(seeds=st.sets(st.sampled_from(SEEDS)), dest=st.sampled_from(DESTINATIONS),
                mode=st.sampled_from(CONFLICT_MODES), flow=st.sampled_from(FLOWS), sizes=SIZES)
    def seed_and_start(self, seeds: set[str], dest: str, mode: str, flow: str, sizes: list[int]) -> None:
        """Old data in the destinations, and a first job (every example has one: rules
        disabled by hypothesis' swarm testing must not leave an example with nothing to do)."""
        for relative in sorted(seeds):
            data = f"old data {relative}\n".encode()
            self.base.write_bytes(self.path(relative), data)
            self.world.put(relative, data)
        self.detail.append(f"seeds {sorted(seeds)}")
        self.start_job(dest, mode, flow, sizes)

    # -- the model's conflict modes ----------------------------------------------------------------
    # -- jobs -------------------------------------------------------------------------------------
    @precondition(lambda self: len(self.jobs) < MAX_JOBS and
                  sum(j.active for j in self.jobs) < MAX_ACTIVE_JOBS)
    @rule(dest=st.sampled_from(DESTINATIONS), mode=st.sampled_from(CONFLICT_MODES),
          flow=st.sampled_from(FLOWS), sizes=SIZES)
    @step
    def start_job(self, dest: str, mode: str, flow: str, sizes: list[int]) -> None:
        job_id = f"j{len(self.jobs)}"
        config = {**self.config, MODE_KEY: mode}
        ctx = JobContext(self.url(dest), job_id=job_id, config=config, task_messages=flow == "messages")
        tasks = [Task(i, task_names(job_id, i, size)) for i, size in enumerate(sizes)]
        job = Job(len(self.jobs), ctx, dest, mode, flow, config, tasks)
        self.jobs.append(job)
        self.detail.append(f"start {job_id} {dest} {mode} {flow} {sizes}")
        job.driver, job.driver_store = self.make(job)
        if not self.setup(job):
            job.status = "refused"

    def setup(self, job: Job, restart: bool = False) -> bool:
        """``setup_job`` of the job's current attempt, as the model expects it to answer."""
        assert job.driver is not None
        expect_refusal: bool | None = False
        if job.mode == "fail" and self.traits.fail_at_setup:
            others = self.others_data(job, self.world.under(job.dest))
            if job.job_id in self.committed_jobs:  # its own _SUCCESS lets a later attempt in, if there
                mine = self.success[job.dest] == {job.job_id}
                expect_refusal = False if mine else (None if others is not False else False)
            elif restart and job.commit_began:  # the journal (or record) may let it in
                expect_refusal = False if others is False else None
            else:
                expect_refusal = others
        try:
            job.driver.setup_job(job.ctx)
        except CommitError as exc:
            if expect_refusal is False:
                raise self.violation(f"setup_job of {job.job_id} attempt {job.ctx.attempt} failed: "
                                     f"{type(exc).__name__}: {exc}") from exc
            self.note(f"setup of {job.job_id} refused: {exc}")
            return False
        if expect_refusal is True:
            raise self.violation(f"setup_job of {job.job_id} accepted {job.dest}, which holds data, "
                                 "under conflict mode fail")
        if job.mode == "replace" and self.traits.replace_at == "setup":
            self.replaced(job, self.world.under(job.dest))
        return True

    def jobs_where(self, test: Callable[[Job], bool]) -> list[Job]:
        return [job for job in self.jobs if test(job)]

    @staticmethod
    def pick(items: list[Any], index: int) -> Any:
        return items[index % len(items)]

    # -- task attempts ----------------------------------------------------------------------------
    def startable(self) -> list[tuple[Job, Task]]:
        return [(job, task) for job in self.jobs
                if job.status == "live" and job.driver is not None and not job.doomed
                for task in job.tasks
                if next_attempt_number(job, task.index) < MAX_ATTEMPTS_PER_TASK]

    @precondition(lambda self: self.startable())
    @rule(pick=PICK)
    @step
    def start_attempt(self, pick: int) -> None:
        job, task = self.pick(self.startable(), pick)
        self.new_attempt(job, task)

    def new_attempt(self, job: Job, task: Task) -> Attempt:
        number = next_attempt_number(job, task.index)
        ctx = job.task_attempt(task.index, number)
        committer, store = self.make(job)
        files = {name: attempt_bytes(job.job_id, ctx.job.attempt, task.index, number, k)
                 for k, name in enumerate(task.names)}
        attempt = Attempt(f"{job.job_id}.{ctx.job.attempt}.t{task.index}.a{number}", job, ctx,
                          committer, store, files)
        self.detail.append(f"start_attempt {attempt.key}")
        committer.setup_task(ctx)
        job.attempts.append(attempt)
        return attempt

    def runnable(self) -> list[tuple[Job, Task]]:
        return [(job, task) for job, task in self.startable()
                if not task.done and job.driver is not None]

    @precondition(lambda self: self.runnable())
    @rule(pick=PICK)
    @step
    def run_task(self, pick: int) -> None:
        """A healthy attempt of a task not done yet: set up, write everything, finish (its
        commit as the engine makes it, if the engine lets it commit now)."""
        job, task = self.pick(self.runnable(), pick)
        attempt = self.new_attempt(job, task)
        self.write_files(attempt, everything=True)
        if attempt in self.committable():
            self.commit_attempt(attempt)

    def attempts(self, test: Callable[[Attempt], bool]) -> list[Attempt]:
        return [a for job in self.jobs for a in job.attempts if test(a)]

    def writable(self) -> list[Attempt]:
        return self.attempts(lambda a: a.state == "running" and not a.fully_written)

    @precondition(lambda self: self.writable())
    @rule(pick=PICK, everything=st.booleans())
    @step
    def write(self, pick: int, everything: bool) -> None:
        """The attempt writes its next file, or all the rest: a zombie (its job ended) too."""
        self.write_files(self.pick(self.writable(), pick), everything)

    def write_files(self, attempt: Attempt, everything: bool) -> None:
        self.detail.append(f"write {attempt.key} {'all' if everything else 'one'}")
        items = list(attempt.files.items())
        todo = items[attempt.written:] if everything else items[attempt.written:attempt.written + 1]
        fs, base = attempt.committer.filesystem(attempt.ctx), attempt.committer.work_path(attempt.ctx)
        try:
            for relative, data in todo:
                with fs.open(posixpath.join(base, relative), "wb") as handle:
                    handle.write(data)
                attempt.written += 1
        except (OSError, CommitError) as exc:
            if not attempt.job.ended:
                raise self.violation(f"{attempt.key} could not write: {type(exc).__name__}: {exc}") from exc
            self.note(f"late write of {attempt.key} refused: {exc}")
        settle_background_uploads(attempt)

    def committable(self, dying: bool = False) -> list[Attempt]:
        """Attempts an engine lets commit now (docs/protocol.md, engines' duties 2 and 3)."""
        found = []
        for job in self.jobs:
            if job.status != "live" or job.doomed:
                continue
            for attempt in job.attempts:
                if attempt.state != "running" or not attempt.current or not attempt.fully_written:
                    continue
                task = job.tasks[attempt.index]
                if job.flow == "messages":
                    if self.traits.isolated:
                        found.append(attempt)  # every finished attempt commits on its executor
                    elif not dying and job.driver is not None and task.chosen is None:
                        found.append(attempt)  # the driver commits the one it accepts
                elif job.driver is not None and (
                        task.permitted is None or (task.lost and self.traits.repeatable_task)):
                    found.append(attempt)  # first to ask, or the retry of a lost one
        return found

    def expect_task_refusal(self, attempt: Attempt) -> bool | None:
        """``partitioned`` under ``fail``: a task commit refuses a partition that holds data."""
        job = attempt.job
        if not (self.traits.fail_at_task_commit and job.mode == "fail"):
            return False
        partitions = self.partitions(job, list(attempt.files)) - {""}
        paths = [p for p in self.world.under(job.dest)
                 if any(p.startswith(posixpath.join(job.dest, part) + "/") for part in partitions)]
        return self.world.holds_data(paths)

    def begin_task_commit(self, attempt: Attempt) -> Committer:
        """Permission and who commits: the driver itself (messages flow, committers that are
        not isolated), else the attempt; a retry's permission recorded for the delayed
        committers (``allow_task_commit``: discovery then commits it, HADOOP-17258)."""
        job, task = attempt.job, attempt.job.tasks[attempt.index]
        if job.flow == "discovery":
            if task.lost and self.traits.delayed:
                assert job.driver is not None
                job.driver.allow_task_commit(attempt.ctx)  # type: ignore[attr-defined]
                task.maybe = []  # the permission record wins over any earlier claim
            task.permitted = attempt
        if job.flow == "messages" and not self.traits.isolated:
            assert job.driver is not None
            return job.driver
        return attempt.committer

    @precondition(lambda self: self.committable())
    @rule(pick=PICK)
    @step
    def commit_task(self, pick: int) -> None:
        self.commit_attempt(self.pick(self.committable(), pick))

    def commit_attempt(self, attempt: Attempt) -> None:
        job, task = attempt.job, attempt.job.tasks[attempt.index]
        self.detail.append(f"commit_task {attempt.key}")
        if attempt.committer.needs_task_commit(attempt.ctx) != bool(attempt.files):
            raise self.violation(f"needs_task_commit of {attempt.key} is wrong (it wrote "
                                 f"{len(attempt.files)} files)")
        refusal = self.expect_task_refusal(attempt)
        committer = self.begin_task_commit(attempt)
        try:
            message = committer.commit_task(attempt.ctx)
        except CommitError as exc:
            if self.ended_by_its_commit(job, exc):
                attempt.state = "aborted"  # its uploads aborted by the refused commit
                return
            if refusal is False:
                raise self.violation(f"task commit of {attempt.key} failed: {type(exc).__name__}: "
                                     f"{exc}") from exc
            attempt.state = "aborted"  # refused before it uploaded anything, and aborted
            job.doomed = "a task commit was refused (conflict mode fail)"
            return
        if refusal is True:
            raise self.violation(f"task commit of {attempt.key} accepted a partition holding "
                                 "data under conflict mode fail")
        attempt.state = "committed"
        self.task_committed(job, task, attempt, message)

    def ended_by_its_commit(self, job: Job, exc: CommitError) -> bool:
        """Was the task commit refused because the job's commit began? The delayed
        committers end the job for its writers as their job commit starts (its markers go,
        docs/protocol.md): a job commit that failed or died after that leaves the job live
        for its driver (to commit again, or abort), and refuses every later task commit,
        loudly. Only an attempt of a job whose tasks were all committed can meet it."""
        if not (self.traits.delayed and job.commit_began and "is not active" in str(exc)):
            return False
        self.note(f"task commit refused: {job.job_id}'s commit had ended it for writers")
        return True

    def task_committed(self, job: Job, task: Task, attempt: Attempt,
                       message: dict[str, Any] | None) -> None:
        if job.flow == "messages":
            if task.chosen is not None:
                return  # a speculative duplicate: the driver keeps the first message
            task.message = message
        task.chosen, task.output, task.lost, task.maybe = attempt, [dict(attempt.files)], False, []
        task.holders = [attempt]
        if not self.traits.invisible:  # v2 publishes at task commit
            for name, data in attempt.files.items():
                self.world.put(posixpath.join(job.dest, name), data)

    @precondition(lambda self: self.committable(dying=True))
    @rule(pick=PICK, requests=st.integers(0, 6))
    @step
    def task_dies_in_commit(self, pick: int, requests: int) -> None:
        """The attempt is killed after ``requests`` requests of its task commit (or, if the
        commit finished first, before its message reached the driver)."""
        attempt: Attempt = self.pick(self.committable(dying=True), pick)
        job, task = attempt.job, attempt.job.tasks[attempt.index]
        self.detail.append(f"task_dies_in_commit {attempt.key} after {requests}")
        refusal = self.expect_task_refusal(attempt)
        committer = self.begin_task_commit(attempt)
        attempt.store.die_after(requests)
        finished = False
        try:
            committer.commit_task(attempt.ctx)
            finished = True
        except ProcessDied:
            pass
        except CommitError as exc:
            if not self.ended_by_its_commit(job, exc):
                if refusal is False:
                    raise self.violation(f"task commit of {attempt.key} failed: {exc}") from exc
                job.doomed = "a task commit was refused (conflict mode fail)"
        attempt.store.kill()
        attempt.state = "dead"
        if job.flow == "messages":
            return  # its message never reached the driver
        task.lost, task.chosen, task.output = True, None, None
        task.maybe.append(dict(attempt.files))
        task.holders.append(attempt)
        if not self.traits.repeatable_task:
            job.doomed = "a task commit was lost and task commit is not repeatable"
        if not self.traits.invisible:
            for name, data in attempt.files.items():
                path = posixpath.join(job.dest, name)
                (self.world.put if finished else self.world.maybe_put)(path, data)

    def late(self) -> list[Attempt]:
        return self.attempts(lambda a: a.state in ("running", "committed") and a.job.ended)

    @precondition(lambda self: self.late())
    @rule(pick=PICK)
    @step
    def late_commit(self, pick: int) -> None:
        """A zombie commits after its job ended: it must fail, and publish nothing (the
        world check). A job whose cleanup did not finish (its driver died after _SUCCESS, a
        store error) may still have its markers: the commit may then answer, uselessly."""
        attempt: Attempt = self.pick(self.late(), pick)
        self.detail.append(f"late_commit {attempt.key}")
        try:
            attempt.committer.commit_task(attempt.ctx)
        except CommitError:
            attempt.state = "refused"  # its task failed: it only aborts from now on
            return
        if attempt.job.leftover:
            attempt.state = "committed"
            return
        raise self.violation(f"the task commit of {attempt.key} succeeded after its job "
                             f"{attempt.job.job_id} was {attempt.job.status}")

    def abortable(self) -> list[Attempt]:
        def engine_may_abort(a: Attempt) -> bool:
            task = a.job.tasks[a.index]
            # never the attempt whose output the task's is (a recovered one's too), nor the
            # one the driver let commit
            return a.job.ended or (a not in task.holders and task.permitted is not a)
        return self.attempts(lambda a: a.state in ("running", "committed", "refused")
                             and engine_may_abort(a))

    @precondition(lambda self: self.abortable())
    @rule(pick=PICK)
    @step
    def abort_task(self, pick: int) -> None:
        attempt: Attempt = self.pick(self.abortable(), pick)
        self.detail.append(f"abort_task {attempt.key}")
        attempt.committer.abort_task(attempt.ctx)  # never raises
        attempt.state = "aborted"

    # -- job commit ---------------------------------------------------------------------------------
    def can_commit(self) -> list[Job]:
        return self.jobs_where(lambda j: j.can_commit or (
            j.status == "committed" and j.leftover and j.driver is not None))

    @precondition(lambda self: self.can_commit())
    @rule(pick=PICK)
    @step
    def commit_job(self, pick: int) -> None:
        job: Job = self.pick(self.can_commit(), pick)
        self.run_job_commit(job)

    @precondition(lambda self: self.can_commit())
    @rule(pick=PICK, requests=st.integers(0, 40))
    @step
    def driver_dies_in_commit(self, pick: int, requests: int) -> None:
        job: Job = self.pick(self.can_commit(), pick)
        self.run_job_commit(job, die_after=requests)

    @precondition(lambda self: self.can_commit())
    @rule(pick=PICK, requests=st.integers(0, 40))
    @step
    def commit_job_fails(self, pick: int, requests: int) -> None:
        """One request of the job commit fails (the store's error, the driver lives on)."""
        job: Job = self.pick(self.can_commit(), pick)
        self.run_job_commit(job, fail_after=requests)

    # -- abort, drivers that die, recovery ---------------------------------------------------------------
    def failing(self) -> list[Job]:
        """Jobs an engine may fail: something of them ran (a job is not aborted unprompted)."""
        return self.jobs_where(lambda j: j.status == "live" and j.driver is not None and
                               bool(j.attempts or j.doomed or j.commit_began))

    @precondition(lambda self: self.failing())
    @rule(pick=PICK)
    @step
    def abort_job(self, pick: int) -> None:
        """The engine fails the job: ``abort_job`` and ``cleanup_job`` (duty 5)."""
        job: Job = self.pick(self.failing(), pick)
        assert job.driver is not None
        self.detail.append(f"abort_job {job.job_id}.{job.ctx.attempt}")
        job.driver.abort_job(job.ctx)
        job.driver.cleanup_job(job.ctx)
        self.job_aborted(job)

    def job_aborted(self, job: Job) -> None:
        """Nothing of an aborted job stays visible (``v2``: what its tasks published stays)."""
        if self.traits.invisible:
            for path in self.own_paths(job):
                self.world.delete(path)
        job.status = "aborted"
        self.check_state_gone(job)

    def mortal(self) -> list[Job]:
        return self.jobs_where(lambda j: j.active and j.driver is not None and bool(j.attempts))

    @precondition(lambda self: self.mortal())
    @rule(pick=PICK)
    @step
    def driver_dies(self, pick: int) -> None:
        job: Job = self.pick(self.mortal(), pick)
        self.detail.append(f"driver_dies {job.job_id}")
        assert job.driver_store is not None
        job.driver_store.kill()
        job.driver, job.driver_store = None, None

    def orphans(self) -> list[Job]:
        return self.jobs_where(lambda j: j.driver is None and j.active)

    @precondition(lambda self: [j for j in self.orphans() if j.flow == "discovery"])
    @rule(pick=PICK)
    @step
    def restart_driver(self, pick: int) -> None:
        """A new driver: the next job attempt recovers what it can and reruns the rest."""
        job: Job = self.pick([j for j in self.orphans() if j.flow == "discovery"], pick)
        job.ctx = job.ctx.next_attempt()
        job.driver, job.driver_store = self.make(job)
        self.detail.append(f"restart_driver {job.job_id}.{job.ctx.attempt}")
        if job.status == "committed" and not self.traits.invisible:
            job.status, job.leftover = "live", False  # v2's later attempt commits again
        elif job.status == "committed":  # before setup_job writes the new attempt's state
            job.record_gone = job.record_gone or not self.state_left(job)
        if not self.setup(job, restart=True):
            job.doomed = "the restarted driver's job setup was refused"
            return
        for task in job.tasks:
            self.recover(job, task)

    def recover(self, job: Job, task: Task) -> None:
        assert job.driver is not None
        got = job.driver.recover_task(job.task_attempt(task.index, 0))
        committed = task.output if task.done else None
        candidates = (committed or []) + task.maybe
        if job.status == "committed":
            return  # its commit returns the earlier report whatever is recovered
        if got:
            if not self.traits.recoverable or not candidates:
                raise self.violation(f"recover_task recovered task {task.index} of {job.job_id}, "
                                     "which no attempt committed")
            task.output, task.lost, task.maybe = candidates, False, []
            return
        if committed and self.traits.recoverable and not job.commit_began:
            raise self.violation(f"recover_task did not recover task {task.index} of {job.job_id}, "
                                 "committed by the previous job attempt")
        task.output, task.chosen, task.permitted, task.lost, task.maybe = None, None, None, False, []
        task.message, task.holders = None, []

    def recommittable(self) -> list[Job]:
        """Jobs whose driver died in the commit of their current attempt (or after it)."""
        return [j for j in self.orphans() if j.status == "committed" or (
            j.commit_began and j.began_attempt == j.ctx.attempt and not j.doomed)]

    @precondition(lambda self: self.recommittable())
    @rule(pick=PICK)
    @step
    def recommit(self, pick: int) -> None:
        """A new process commits the same job attempt again (``job-commit.repeatable``)."""
        job: Job = self.pick(self.recommittable(), pick)
        job.driver, job.driver_store = self.make(job)
        self.run_job_commit(job)

    @precondition(lambda self: self.orphans())
    @rule(pick=PICK, via_cli=st.booleans())
    @step
    def operator_aborts(self, pick: int, via_cli: bool) -> None:
        """The operator aborts a job whose driver is gone: ``outcommit jobs abort``, or the API."""
        job: Job = self.pick(self.orphans(), pick)
        self.detail.append(f"operator_aborts {job.job_id} {'cli' if via_cli else 'api'}")
        self.operator_abort(job, via_cli)

    def operator_abort(self, job: Job, via_cli: bool) -> None:
        self.check_jobs_list(job.dest)  # what the operator looks at first
        ctx = job.ctx
        if job.status == "committed":
            mine = self.success[job.dest] == {job.job_id}
            listed = job.job_id in create_committer(self.url(job.dest), self.config, self.committer_name,
                                                    store=self.base).recovery.state.leftover_jobs()
            if not listed:  # its cleanup had finished after all
                job.leftover = False
                return
            if via_cli and mine:
                self.jobs_cli_abort(job, interrupted=False)
            else:  # the operator knows it committed: its state goes, whatever _SUCCESS shows
                committer, _ = self.make(job)
                committer.recovery.state.cleanup_committed_job(ctx)
            job.leftover = False
            self.check_state_gone(job)
            return
        if via_cli:
            self.jobs_cli_abort(job, interrupted=True)
        else:
            committer, _ = self.make(job)
            committer.abort_job(ctx)
            committer.cleanup_job(ctx)
        self.job_aborted(job)

    def jobs_cli_abort(self, job: Job, interrupted: bool) -> None:
        argv = ["jobs", "abort", self.url(job.dest), job.job_id, "--committer", self.committer_name,
                "--force", *(["--interrupted"] if interrupted else [])]
        for key, value in self.config.items():
            argv += ["--conf", f"{key}={value}"]
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.main(argv)
        if code != 0:
            raise self.violation(f"outcommit {' '.join(argv[:4])}... exited {code}: "
                                 f"{out.getvalue()} {err.getvalue()}")

    def idle(self) -> bool:
        return len(self.jobs) >= MAX_JOBS and not any(j.active for j in self.jobs) and not \
            self.attempts(lambda a: a.state in ("running", "committed", "refused"))

    @precondition(idle)
    @rule()
    @step
    def rest(self) -> None:
        """Every job ended and every attempt is gone: nothing is left to do."""

    # -- the end of an example ---------------------------------------------------------------------
    def teardown(self) -> None:
        try:
            if not self.broken:
                for dest in DESTINATIONS:
                    self.check_jobs_list(dest)
                self.finish()
                self.dirty = True
                self.visible_output_is_the_models()
                self.check_nothing_left()
        finally:
            key = tuple(self.trace)
            type(self).tried.sequences.add(key)
            type(self).tried.detailed.add(tuple(self.detail))
            type(self).tried.steps.update(self.trace)
            type(self).tried.examples += 1
            self.binding.remove_root(self.base, self.root)
            if self.binding.local_dir:
                shutil.rmtree(self.binding.local_dir, ignore_errors=True)

    def finish(self) -> None:
        """End everything as engines and operators would: live jobs aborted, committed
        jobs' leftover state cleaned, every attempt still running ends with ``abort_task``."""
        for job in self.jobs:
            if job.status == "live":
                if job.driver is not None:
                    job.driver.abort_job(job.ctx)
                    job.driver.cleanup_job(job.ctx)
                    self.job_aborted(job)
                else:
                    self.operator_abort(job, via_cli=False)
            elif job.status == "committed" and job.leftover:
                self.operator_abort(job, via_cli=False)
        for attempt in self.attempts(lambda a: a.state in ("running", "committed", "refused")):
            attempt.committer.abort_task(attempt.ctx)
            attempt.state = "aborted"

def settle_background_uploads(attempt: Attempt) -> None:
    """Let a magic attempt's background uploads land before the next step: the machine's
    steps are sequential, and a request still in flight would make replays differ."""
    tracker = getattr(attempt.committer, "_tracker", None)
    if tracker is not None:
        uploads = tracker(attempt.ctx)
        if uploads is not None:
            uploads.wait()


def machine_for(committer: str, binding: Binding) -> type[BatchProtocol]:
    """The machine of one committer on one binding. Its name is its example database key
    (hypothesis keys a machine by its source, or by its name where it has none): stable."""
    name = f"Batch_{committer.replace('-', '_')}_on_{binding.name}"
    return type(name, (BatchProtocol,), {"committer_name": committer, "binding": binding,
                                         "tried": Tried(), "__module__": __name__})


def remove_tree(store: Store, root: str) -> None:
    """Remove an example's root, and abort every pending upload under it."""
    mp = store.multipart()
    if mp is not None:
        for upload in mp.list_pending(root.rstrip("/") + "/"):
            mp.abort(upload.path, upload.upload_id)
    store.delete(root, recursive=True)

