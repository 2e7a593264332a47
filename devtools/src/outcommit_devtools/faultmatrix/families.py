"""How each family of scenarios runs: the failure, the engine's reaction, what to expect.

A runner returns an :class:`~.oracles.Observation` with the destinations' contents
*before* and what they should hold; ``runner.py`` reads the store afterwards and judges.
Whatever a committer call raises inside the job is the job's failure: the engine then
aborts the job (``abort_job`` + ``cleanup_job``), as engines do, and the error is what
the cell reports.
"""

from __future__ import annotations

import posixpath
import unicodedata
from collections.abc import Callable, Mapping

from outcommit import capabilities as caps
from outcommit.context import JobContext
from outcommit.testing.faults import FaultInjectingStore, failing_deletes_in
from outcommit.testing.names import decoy_paths, decoys

from . import driverproc
from .engine import (
    TASKS,
    Attempt,
    CellEnv,
    DriverKilled,
    Engine,
    EngineFailure,
    Files,
    HarnessError,
    job_context,
    task_file_names,
)
from .oracles import Destination, Observation, read_success
from .scenarios import DriverKill, HostileNames, JobsLayout, NameKind, StoreFault, TaskFailure
from .storefaults import Injector, wrap_for

# What the destination holds before the job (conflict modes append/replace decide its fate).
EXISTING: Files = {"old-0.txt": b"old 0\n", "sub/old-1.txt": b"old 1\n", "other/old-2.txt": b"old 2\n"}
MAX_TASK_ATTEMPTS = 2


class NotApplicable(Exception):
    """The scenario cannot happen for this committer and store (the message says why)."""


def final_contents(before: Files, job_output: Files, mode: str, dynamic_partitions: bool) -> Files:
    """What the destination must hold after the job committed ``job_output``."""
    if mode == "replace":
        written = {posixpath.dirname(name) for name in job_output}
        kept = {k: v for k, v in before.items()
                if dynamic_partitions and posixpath.dirname(k) not in written}
        return {**kept, **job_output}
    return {**before, **job_output}


def destination(env: CellEnv, url: str, before: Files) -> Destination:
    path = env.store.strip(url)
    return Destination(url=url, path=path, prefix=env.store.url(path) + "/", before=dict(before),
                       success_before=read_success(env.store, path))


def expect_output(env: CellEnv, d: Destination, engine: Engine, mode: str, committed: bool,
                  extra: Mapping[str, Files] | None = None, also: Engine | None = None) -> None:
    """What the destination holds if ``engine``'s job commits (``extra``: nested jobs' files;
    ``also``: another engine of the job whose output is as acceptable).

    Recorded also when the job failed: a documented limit may leave part of it visible.
    ``committed``: the job did commit, so its ``_SUCCESS`` must be there.
    """
    dpo = engine.committer.has_capability(caps.DYNAMIC_PARTITION_OVERWRITE)
    nested = {k: v for files in (extra or {}).values() for k, v in files.items()}
    outputs = [*engine.expected_outputs(), *(also.expected_outputs() if also else [])]
    d.expected = [{**final_contents(d.before, output, mode, dpo), **nested} for output in outputs]
    if committed:
        d.success_job = engine.job.job_id
        d.success_files = [set(output) for output in outputs]


def run_job(engine: Engine, obs: Observation, body: Callable[[], object]) -> bool:
    """Run ``body`` as the job; on failure abort the job as engines do. True: committed."""
    try:
        body()
        return True
    except (NotApplicable, HarnessError):
        raise
    except Exception as exc:
        obs.error = exc
        engine.abort()
        return False


# -- task attempts ------------------------------------------------------------------------------------
def task_failure(env: CellEnv, s: TaskFailure) -> Observation:
    job = job_context(env.dest, env.make().config, s.flow)
    main = destination(env, env.dest, env.existing)
    obs = Observation([main])
    # The driver's store can run another actor at a chosen operation (the zombie's close).
    hooks = driverproc.wrap(env.store)
    engine = Engine(env, job, s.flow, store=hooks)
    engine.committer.setup_job(job)

    def body() -> None:
        engine.run_all(skip=[0])
        victim = engine.attempt(0, 0)
        victim.setup()
        _victim_fails(env, engine, victim, s)
        engine.run_task(0, 1)
        if s.point == "zombie-before-job-commit":
            _zombie_finishes(engine, victim, obs)
        woke: list[bool] = []
        if s.point == "zombie-during-job-cleanup":
            # Job commit has published everything and starts removing its temporary
            # state: at that moment the zombie closes one more file.
            def late() -> None:
                woke.append(True)
                _late_write(victim, obs)
            driverproc.before_first(hooks, driverproc.cleans_up(engine.committer.dest), late)
        main.before_commit = env.visible(env.dest)
        engine.commit_job()
        hooks.faults.clear()
        if s.point == "zombie-during-job-cleanup":
            if not woke:
                raise HarnessError("job commit deleted none of its temporary state: the zombie "
                                   "never closed its file during the cleanup")
            _zombie_finishes(engine, victim, obs, write=False)
        if s.point == "zombie-after-job-commit":
            _zombie_finishes(engine, victim, obs)

    expect_output(env, main, engine, env.mode, run_job(engine, obs, body))
    return obs


def _victim_fails(env: CellEnv, engine: Engine, victim: Attempt, s: TaskFailure) -> None:
    """Attempt 0 of task 0 dies (or stalls) at the scenario's point."""
    point = s.point
    if point == "mid-write":
        victim.write_partial()
    elif point in ("after-write", "zombie-before-job-commit", "zombie-during-job-cleanup",
                   "zombie-after-job-commit"):
        victim.write()
    elif point == "during-commit":
        _die_in_task_commit(env, engine, victim, s.k)
    elif point == "after-commit":
        if s.flow == "spark" and not engine.isolated:
            raise NotApplicable("the driver commits the task in this flow: no message to lose")
        victim.write()
        if engine.flow == "hadoop":
            engine.accepted[0] = victim
            engine.outputs[0] = [dict(victim.written)]
            victim.commit()
            engine.permitted_attempt_lost(0)
        else:
            victim.commit()  # on the executor; the message never reaches the driver


def _die_in_task_commit(env: CellEnv, engine: Engine, victim: Attempt, k: int) -> None:
    if engine.flow == "spark" and not engine.isolated:
        raise NotApplicable("the driver commits the task in this flow (see the driver/ rows)")
    if not env.binding.separate_processes:
        raise NotApplicable(f"the {env.binding.name} store lives in one process: no attempt can die "
                            "apart from it")
    if engine.flow == "hadoop":
        engine.accepted[0] = victim  # permission granted, then the attempt died committing
    victim.written = dict(victim.files)
    victim.note_commit()
    result = driverproc.attempt_and_die(env.committer, env.dest, env.config, victim.task,
                                        victim.files, driverproc.KillRule("any", k))
    if not result.killed:
        if result.error:
            raise HarnessError(f"the attempt failed in its process before the kill point: {result.error}")
        raise NotApplicable(f"task commit took {result.matched} store operations (< {k}): nothing to kill")
    if engine.flow == "hadoop":
        engine.outputs[0] = [dict(victim.files)]  # its commit may have taken effect
        engine.permitted_attempt_lost(0)


def _late_write(victim: Attempt, obs: Observation) -> None:
    late = {f"late-{victim.index:05d}.txt": b"written by a zombie attempt\n"}
    try:
        victim.write(late)
    except Exception as exc:  # refusing a late write is fine
        obs.notes.append(f"late write refused: {type(exc).__name__}")


def _zombie_finishes(engine: Engine, victim: Attempt, obs: Observation, write: bool = True) -> None:
    """The stalled attempt wakes up: writes one more file and tries to commit, late."""
    if write:
        _late_write(victim, obs)
    try:
        if engine.finish(victim):
            raise EngineFailure("the engine accepted a zombie attempt")  # never: task 0 is accepted
    except EngineFailure:
        raise
    except Exception as exc:
        obs.notes.append(f"late commit refused: {type(exc).__name__}")
        victim.abort()  # a live zombie whose commit failed cleans up after itself


# -- drivers -------------------------------------------------------------------------------------------
#: Publishing operations a whole job commit made, by (binding root, committer, conflict
#: mode): measured by the first publish@k cell that found fewer than k; likewise its store
#: operations (operation@k), by discovery or with messages.
_PUBLISHING: dict[tuple[str, str, str], int] = {}

def driver_kill(env: CellEnv, s: DriverKill) -> Observation:
    # A job a new attempt recovers is committed by discovery then: it cannot declare
    # task messages (its tasks claim), whatever the first attempt's driver passed.
    job = (JobContext(env.dest, config=env.make().config) if s.then in ("recover", "abort-killed-recover")
           else job_context(env.dest, env.make().config, "spark"))
    main = destination(env, env.dest, env.existing)
    obs = Observation([main])
    if not env.binding.separate_processes:
        raise NotApplicable(f"the {env.binding.name} store lives in one process: its driver cannot be "
                            "killed apart")
    # Every store operation (operation@k): by discovery (recover) there are more.
    key = ((env.binding.root, env.committer, f"{env.mode} operations, {s.then == 'recover'}")
           if s.point == "operation" else (env.binding.root, env.committer, env.mode))
    kind = "store" if s.point == "operation" else "publishing"
    counted = _PUBLISHING.get(key)
    if s.point in ("publish", "operation") and counted is not None and counted < s.k:
        # Counted by an earlier cell of this column and mode (the count does not depend on
        # what happens after the kill): running this one again would only find it again.
        raise NotApplicable(f"job commit made {counted} {kind} operations (< {s.k}): "
                            "it finished before the kill point")
    engine = Engine(env, job, "spark")
    engine.committer.setup_job(job)
    if not run_job(engine, obs, engine.run_all):
        return obs
    main.before_commit = env.visible(env.dest)
    rule = {"before-commit": driverproc.KillRule("start"),
            "publish": driverproc.KillRule("publish", s.k),
            "before-success": driverproc.KillRule("before-success"),
            "after-success": driverproc.KillRule("after-success"),
            "operation": driverproc.KillRule("any", s.k)}[s.point]
    messages = engine.spark_messages()
    # One thread in the dying driver: "after the k-th publishing operation" then means
    # exactly k happened and none was half-way (the cell's outcome cannot depend on timing).
    serial = {**env.config, "outcommit.committer.threads": "1"}
    result = driverproc.commit_job_and_die(env.committer, env.dest, serial, job, messages, rule)
    if not result.killed:
        if result.error is None:
            _PUBLISHING[key] = result.matched
            raise NotApplicable(f"job commit made {result.matched} {kind} operations (< {s.k}): "
                                "it finished before the kill point")
        obs.error = RuntimeError(f"job commit failed before the kill point: {result.error}")
        engine.abort()
        expect_output(env, main, engine, env.mode, committed=False)
        return obs
    # Had the dying driver written the job's _SUCCESS, the commit point? Then it committed,
    # and the output must stay what that commit published, whatever comes next.
    own = read_success(env.store, env.store.strip(env.dest)) or {}
    committed = own.get("jobId") == job.job_id and own.get("success") is True
    if s.then == "abort-killed-recover":
        obs.notes.append(f"driver killed {rule.describe()}")
        _abort_killed(env, engine, obs, driverproc.KillRule("unpublish", 1))
        return _recover(env, engine, obs, main, env.mode, committed)
    if s.then in ("abort", "abort-again", "abort-killed"):
        obs.notes.append(f"driver killed {rule.describe()}")
        if s.then == "abort-again":
            _abort_failing_in_destination(env, job, obs)
        if s.then == "abort-killed":
            _abort_killed(env, engine, obs, driverproc.KillRule("undo", 1))
            _commit_again(env, engine, obs)
        Engine(env, job, "spark").abort()  # by the operator, from a new process
        if committed:
            expect_output(env, main, engine, env.mode, committed=True)
            return obs
        obs.error = DriverKilled(f"driver killed {rule.describe()}; the job was aborted")
    elif s.then == "recommit":
        obs.notes.append(f"driver killed {rule.describe()}")
        again = Engine(env, job, "spark")
        again.messages, again.outputs = engine.messages, engine.outputs
        expect_output(env, main, again, env.mode, run_job(again, obs, again.commit_job))
        return obs
    else:
        obs.notes.append(f"driver killed {rule.describe()}")
        return _recover(env, engine, obs, main, env.mode, committed)
    expect_output(env, main, engine, env.mode, committed=False)
    return obs


def _abort_failing_in_destination(env: CellEnv, job: JobContext, obs: Observation) -> None:
    """The operator's first abort, from a new process, where every delete of a file in the
    destination fails (its temporary areas and ``_SUCCESS`` excepted): what it could not
    undo, the second abort must find evidence of."""
    faults = failing_deletes_in(env.store.strip(env.dest))
    Engine(env, job, "spark", store=FaultInjectingStore(env.store, faults)).abort()
    fired = sum(f.fired for f in faults)
    obs.notes.append(f"the first abort's deletes in the destination failed ({fired} refused)")


def _abort_killed(env: CellEnv, engine: Engine, obs: Observation, rule: driverproc.KillRule) -> None:
    """The operator's first abort, in its own process, dies as ``rule`` says: right after
    its first undoing operation (``abort-killed``: the delayed committers' first upload
    abort, before any file is deleted; the rename committers' first delete), or its first
    delete of a data file in the destination (``abort-killed-recover``: part of what the
    interrupted commit published is gone, the rest still visible). An abort that never
    gets there makes the cell not applicable (``abort-again`` and ``abort`` cover it)."""
    serial = {**env.config, "outcommit.committer.threads": "1"}
    result = driverproc.abort_job_and_die(env.committer, env.dest, serial, engine.job, rule)
    if not result.killed:
        raise NotApplicable("the abort did not reach its kill point: nothing was published to "
                            "undo, or the commit had finished")
    obs.notes.append(f"the first abort was killed {rule.describe()}")


def _commit_again(env: CellEnv, engine: Engine, obs: Observation) -> None:
    """A driver commits the job attempt again, with the first driver's messages. An abort
    began: that commit must not succeed (the cell's abort afterwards expects what an
    abort promises, and a commit that succeeded leaves output it keeps)."""
    again = Engine(env, engine.job, "spark")
    again.messages, again.outputs = engine.messages, engine.outputs
    try:
        again.commit_job()
        obs.notes.append("the commit after it succeeded")
    except Exception as exc:
        obs.notes.append(f"the commit after it was refused: {type(exc).__name__}")


def _recover(env: CellEnv, previous: Engine, obs: Observation, main: Destination, mode: str,
             committed: bool = False) -> Observation:
    """A new job attempt: recover each task, rerun the ones it cannot, commit by discovery.

    ``committed``: the previous attempt's commit wrote ``_SUCCESS``, so the job's output is
    that attempt's, not what the new one reruns (committing both would commit the job twice).
    """
    job = previous.job.next_attempt()
    engine = Engine(env, job, "spark")

    def body() -> None:
        engine.committer.setup_job(job)
        for index in range(TASKS):
            if engine.committer.recover_task(job.task_attempt(index)):
                engine.outputs[index] = previous.outputs[index]
                obs.notes.append(f"task {index} recovered")
            else:
                engine.run_task(index)
                obs.notes.append(f"task {index} rerun")
        engine.committer.commit_job(job)

    done = run_job(engine, obs, body)
    # A committer that publishes at task commit (v2) cannot keep the rerun tasks' output out:
    # they replace the committed files, a whole output of the job too.
    rerun = None if engine.committer.has_capability(caps.OUTPUT_INVISIBLE_UNTIL_JOB_COMMIT) else engine
    expect_output(env, main, previous if committed else engine, env.mode, done,
                  also=rerun if committed else None)
    return obs


# -- store faults ------------------------------------------------------------------------------------------
def store_fault(env: CellEnv, s: StoreFault) -> Observation:
    wrapper = wrap_for(s, env.store)
    if wrapper is not None:
        env.store = wrapper
    injector = Injector(s, env.binding.proxy if s.store != "rename" else None, wrapper)
    job = job_context(env.dest, env.make().config, "spark")
    main = destination(env, env.dest, env.existing)
    obs = Observation([main])
    engine = Engine(env, job, "spark")
    engine.committer.setup_job(job)

    def body() -> None:
        if s.phase in ("tasks", "task-commit"):
            with _armed(injector, obs):
                for index in range(TASKS):
                    _run_with_retries(engine, index, obs)
        else:
            engine.run_all()
        main.before_commit = env.visible(env.dest)
        if s.phase == "job-commit":
            with _armed(injector, obs):
                engine.commit_job()
        else:
            engine.commit_job()

    try:
        committed = run_job(engine, obs, body)
    finally:
        injector.disarm()
    if injector.fired == 0:
        raise NotApplicable(f"no {s.target} request in the {s.phase} phase of this committer")
    obs.notes.append(injector.describe())
    expect_output(env, main, engine, env.mode, committed)
    return obs


class _armed:
    """The fault is active for one phase only: the engine's abort runs without it."""

    def __init__(self, injector: Injector, obs: Observation) -> None:
        self.injector = injector

    def __enter__(self) -> None:
        self.injector.arm()

    def __exit__(self, *exc: object) -> None:
        self.injector.disarm()


def _run_with_retries(engine: Engine, index: int, obs: Observation) -> None:
    """A task whose attempts may fail: retried as engines do, up to MAX_TASK_ATTEMPTS."""
    for number in range(MAX_TASK_ATTEMPTS):
        attempt = engine.attempt(index, number)
        try:
            attempt.setup()
            attempt.write()
            engine.finish(attempt)
            return
        except Exception as exc:
            obs.notes.append(f"task {index} attempt {number} failed: {type(exc).__name__}")
            attempt.abort()  # a live attempt that failed cleans up after itself
            if attempt.commit_started and not engine.committer.has_capability(caps.TASK_COMMIT_REPEATABLE):
                raise EngineFailure(f"task {index}: task commit failed and {engine.committer.name} task "
                                    f"commit is not repeatable: failing the job ({exc})") from exc
            engine.accepted.pop(index, None)
            if number + 1 == MAX_TASK_ATTEMPTS:
                raise EngineFailure(f"task {index} failed {MAX_TASK_ATTEMPTS} times: {exc}") from exc


# -- several jobs ------------------------------------------------------------------------------------------
def jobs_layout(env: CellEnv, s: JobsLayout) -> Observation:
    return _LAYOUTS[s.layout](env)


def _start(env: CellEnv, url: str, label: str) -> Engine:
    committer = env.make(url)
    job = job_context(url, committer.config, "spark")
    engine = Engine(env, job, "spark", label)
    engine.committer.setup_job(job)
    return engine


def _same_destination(env: CellEnv) -> Observation:
    main = destination(env, env.dest, env.existing)
    obs = Observation([main])
    a = _start(env, env.dest, "a-")
    b = _start(env, env.dest, "b-")
    if run_job(a, obs, a.run_all) and run_job(b, obs, b.run_all) and \
            run_job(a, obs, a.commit_job) and run_job(b, obs, b.commit_job):
        main.expected = [{**main.before, **ea, **eb} for ea in a.expected_outputs()
                         for eb in b.expected_outputs()]
        main.success_job = b.job.job_id
        main.success_files = [set(eb) for eb in b.expected_outputs()]
    return obs


def _adjacent(env: CellEnv) -> Observation:
    ten_url = env.dest + "0"  # dataset1 -> dataset10
    main = destination(env, env.dest, env.existing)
    ten = destination(env, ten_url, env.visible(ten_url))
    obs = Observation([main, ten])
    a = _start(env, env.dest, "a-")
    b = _start(env, ten_url, "b-")
    ok = run_job(a, obs, a.run_all) and run_job(b, obs, b.run_all)
    if ok:
        a.abort()  # dataset1's abort must leave dataset10's pending work alone...
        ok = run_job(b, obs, b.commit_job)
    if ok:
        again = _start(env, env.dest, "c-")  # ...and dataset1's commit must not take it
        def run_and_commit() -> None:
            again.run_all()
            again.commit_job()

        committed = run_job(again, obs, run_and_commit)
        expect_output(env, main, again, "append", committed)
        expect_output(env, ten, b, "append", committed)
    return obs


def _nested(parent_first: bool) -> Callable[[CellEnv], Observation]:
    def run(env: CellEnv) -> Observation:
        child_url = env.dest + "/child"
        main = destination(env, env.dest, env.existing)
        child = destination(env, child_url, {})
        obs = Observation([main, child])
        parent_job = _start(env, env.dest, "p-")
        child_job = _start(env, child_url, "c-")
        order = (parent_job, child_job) if parent_first else (child_job, parent_job)
        committed = run_job(parent_job, obs, parent_job.run_all) and \
            run_job(child_job, obs, child_job.run_all) and \
            run_job(order[0], obs, order[0].commit_job) and run_job(order[1], obs, order[1].commit_job)
        expect_output(env, child, child_job, "append", committed)
        expect_output(env, main, parent_job, "append", committed,
                      {"child": {f"child/{k}": v for k, v in child.expected[0].items()}})
        return obs
    return run


def _bucket_root(env: CellEnv) -> Observation:
    root = env.binding.new_container()
    inner_url = root.rstrip("/") + "/inner"
    env.extra_roots.append(root)
    top = destination(env, root, {})
    inner = destination(env, inner_url, {})
    obs = Observation([top, inner])
    outer_job = _start(env, root, "r-")
    inner_job = _start(env, inner_url, "i-")
    committed = run_job(outer_job, obs, outer_job.run_all) and \
        run_job(inner_job, obs, inner_job.run_all) and \
        run_job(outer_job, obs, outer_job.commit_job) and run_job(inner_job, obs, inner_job.commit_job)
    expect_output(env, inner, inner_job, "append", committed)
    expect_output(env, top, outer_job, "append", committed,
                  {"inner": {f"inner/{k}": v for k, v in inner.expected[0].items()}})
    return obs


def _fail_refuses(env: CellEnv) -> Observation:
    """The runner set conflict mode ``fail`` with data in the destination: the job must fail."""
    main = destination(env, env.dest, env.existing)
    obs = Observation([main])
    job = job_context(env.dest, env.make().config, "spark")
    engine = Engine(env, job, "spark")

    def body() -> None:
        engine.committer.setup_job(job)
        engine.run_all()
        engine.commit_job()

    expect_output(env, main, engine, "fail", run_job(engine, obs, body))
    return obs


_LAYOUTS: Mapping[str, Callable[[CellEnv], Observation]] = {
    "same-destination": _same_destination,
    "adjacent": _adjacent,
    "nested-parent-first": _nested(True),
    "nested-child-first": _nested(False),
    "bucket-root": _bucket_root,
    "fail-refuses-existing": _fail_refuses,
}


# -- hostile names ---------------------------------------------------------------------------------
def _nfc(text: str) -> str:
    return unicodedata.normalize("NFC", text)


#: Per kind of name: the destination's name, and the name of each segment of a job's files.
#: No name ends in '#' or '?' (adlfs, the writers' filesystem on Azure, would drop it:
#: docs/capabilities.md, "Names") or holds '\\' (Azure reads it as '/').
NAMES: Mapping[NameKind, tuple[str, Callable[[str], str]]] = {
    "glob": ("data[1]*set", lambda segment: f"q[1]*{segment}"),
    "unicode": (_nfc("dätaset é"), lambda segment: _nfc(f"é {segment}")),
    "quoting": ("data set%2F1+x", lambda segment: f"%41 #{segment}+"),
}


def destination_name(kind: NameKind) -> str:
    return NAMES[kind][0]


def renamer(kind: NameKind) -> Callable[[str], str]:
    """Each segment of a relative path named as ``kind`` names it."""
    segment = NAMES[kind][1]
    return lambda rel: "/".join(segment(part) for part in rel.split("/"))


def beside_destination(kind: NameKind) -> Files:
    """Files beside the destination, in directories its name would reach as a pattern, in
    its other Unicode form or unquoted (``data1set/``, ``data set/1+x/``): outside it."""
    return {f"{decoy}/keep.txt": b"beside the destination, a name its name would reach\n"
            for decoy in decoys(destination_name(kind))}


def existing_names(kind: NameKind) -> Files:
    """What the destination holds before the job: the usual old files, named as ``kind``;
    an older version of each file the job writes (a file committed again is replaced:
    ``v2`` deletes it first); decoys of those names (kept by ``append``)."""
    rename = renamer(kind)
    existing = {rename(rel): data for rel, data in EXISTING.items()}
    written = [rename(rel) for index in range(TASKS) for rel in task_file_names("", index)]
    existing.update({rel: b"an older version\n" for rel in written})
    for rel in written:
        for decoy in decoy_paths(rel.split("/"), taken=[*existing, *written], limit=2):
            existing[decoy] = b"a decoy the job's names would reach\n"
    return existing


def hostile_names(env: CellEnv, s: HostileNames) -> Observation:
    """One job, named as ``s.kind`` (the runner named the destination, seeded its decoys
    and the old files): it commits exactly its files, and touches nothing else."""
    main = destination(env, env.dest, env.existing)
    obs = Observation([main])
    job = job_context(env.dest, env.make().config, "spark")
    engine = Engine(env, job, "spark")

    def body() -> None:
        engine.committer.setup_job(job)
        engine.run_all()
        engine.commit_job()

    expect_output(env, main, engine, s.mode, run_job(engine, obs, body))
    return obs
