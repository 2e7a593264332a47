"""The streaming sink against a reference model: a hypothesis ``RuleBasedStateMachine``.

Rules are real calls on a real store: runs of queries start (a restart: possibly with
another committer, possibly replaying the last batch; the previous run may live on, as a
driver that lost its lease), their tasks write a batch (``StreamingSink.begin_task`` and
the committer's task attempts), their drivers commit it (``commit_batch``), stopping at
the sink's steps ("job-committed", "decided", "logged") to be resumed or killed later
while other runs go on, or abort it (``abort_batch``, Spark's abort); a second query
writes to the same destination; a small compact interval compacts the log every few
batches. Interleavings are the machine's: each commit runs in its own thread and stops
at a step (``interleave.Driver``): one thread runs at a time, no sleeps.

The model knows which batches were reported committed and by which job, which jobs
began a commit, which may have visible files that are not logged (a commit stopped or
killed midway, until a later commit settles it), and which query owns the log. After
every step:

- every logged file exists (``committed_files`` verifies: a batch of missing files is
  data loss), and the log names each batch's rows once;
- a batch reported committed stays logged, by the same job; a logged batch was begun by
  that job's commit; the log holds only its owner's batches;
- every visible data file (outside the log and the temporary areas) is logged, or is a
  file of a commit in flight or interrupted;
- a second query is refused before it writes (its tasks), with the error naming the fix.

At the end, stopped drivers are killed and a fresh run of the owner query replays every
batch begun: then the log holds exactly each batch's rows (read back), nothing else is
visible, and no record, decision, temporary directory or pending upload is left.

Budgets (``tests/generative.py``, ``BUDGETS`` below): in CI ``memory`` 150 examples and
``file`` 10 (v1, v2, manifest) of up to 30 rules, ``s3`` 25 on the moto server (directory,
magic, partitioned) of up to 20: about 30 s of CPU, 40 s on the shared machine when it is
quiet, 62 s at a load average of 6; Azurite (blocklist) and fake-gcs-server (manifest,
v2) too in ``make generative`` (20x). What each store's machine tried (examples,
distinct rule sequences, rules) is printed at the end of the run (conftest.py). What it
found on the code before issue 27's fixes: docs/reliability.md.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from interleave import Driver, Killed
from spark_view import spark_view

import outcommit.streaming as streaming
from generative import budget, long_run
from outcommit import open_store
from outcommit.engine.tasks import WriteSettings, write_attempt
from outcommit.factory import describe_capabilities
from outcommit.paths import hidden_from_readers
from outcommit.streaming import (
    BatchAlreadyCommitted,
    BatchIdentity,
    BatchLogError,
    BatchRolledBack,
    BatchTaskResult,
    StreamingSink,
)
from outcommit.testing.conformance import leftovers

QUERIES = ("query-one", "query-two")
STOPS = (None, "job-committed", "decided", "logged")
ROWS = 12
MAX_LIVE_RUNS = 3
MAX_BATCH = 5
#: The machine expects a second query's tasks to be refused (issue 27, 2). Off, it still
#: finds what that second query breaks, as data lost or left behind.
EXPECT_REFUSAL = True


def rows_of(query: str, batch_id: int) -> pa.Table:
    """The rows a query's source gives batch ``batch_id`` (the same at every replay)."""
    first = QUERIES.index(query) * 100_000 + batch_id * 1000
    return pa.table({"id": pa.array(range(first, first + ROWS), pa.int64()),
                     "part": pa.array([i % 2 for i in range(ROWS)], pa.int64())})


def write_batch(sink: StreamingSink, query: str, run_id: str, batch_id: int,
                tasks: int) -> list[BatchTaskResult]:
    """The batch's tasks, each writing its share of the rows (none for a committed batch)."""
    identity = BatchIdentity(query, batch_id, run_id)
    table = rows_of(query, batch_id)
    results = []
    for index in range(tasks):
        job = sink.begin_task(identity)
        if job is None:
            results.append(BatchTaskResult(identity, None))
            continue
        share = table.slice(index * ROWS // tasks, (index + 1) * ROWS // tasks - index * ROWS // tasks)
        attempt = write_attempt(sink.committer, job.task_attempt(index, 0), share.to_batches(),
                                WriteSettings(max_rows_per_file=4))
        results.append(BatchTaskResult(identity, job.job_id, attempt))
    return results


@dataclass
class Run:
    """One run of a query (a driver process, from a start or a restart)."""

    name: str
    query: str
    run_id: str
    committer: str
    batch: int
    sink: StreamingSink | None = None
    results: list[BatchTaskResult] | None = None
    driver: Driver | None = None
    alive: bool = True

    @property
    def job_id(self) -> str:
        return BatchIdentity(self.query, self.batch, self.run_id).job_id()

    @property
    def stopped(self) -> bool:
        return self.driver is not None and self.driver.stopped

    @property
    def idle(self) -> bool:
        return self.alive and not self.stopped

    def on_step(self, step: str, batch_id: int) -> None:
        if self.driver is not None:
            self.driver.on_step(step, batch_id)


@dataclass(frozen=True)
class Target:
    """A store to run the machine on: a fresh destination per example, its committers."""

    name: str
    new_url: Callable[[], str]
    config: dict[str, Any]
    committers: tuple[str, ...] = ()
    default: str = ""  # the store's default committer: the last restart's


@dataclass
class Tried:
    """What a machine's examples tried: each example's rule sequence (a rule with the
    choice that shapes the interleaving: where a commit stops, a resume or a kill)."""

    sequences: set[tuple[str, ...]] = field(default_factory=set)
    steps: Counter[str] = field(default_factory=Counter)
    examples: int = 0


@dataclass
class Model:
    owner: str | None = None
    start: dict[str, int] = field(default_factory=dict)        # query -> its first batch
    checkpoint: dict[str, int] = field(default_factory=dict)   # query -> next batch to run
    committed: dict[int, str | None] = field(default_factory=dict)  # batch -> its job, as reported
    begun: dict[int, set[str]] = field(default_factory=dict)   # batch -> jobs whose commit began
    in_flight: dict[str, int] = field(default_factory=dict)    # job -> batch: may have unlogged files
    written: dict[str, int] = field(default_factory=dict)      # query -> highest batch its tasks wrote


class StreamingMachine(RuleBasedStateMachine):
    target: Target  # set by the test
    tried: Tried    # set by the test

    def __init__(self) -> None:
        super().__init__()
        self.url = self.target.new_url()
        self.config = dict(self.target.config)
        self.store = open_store(self.url, self.config)
        self.dest = self.store.strip(self.url)
        self.model = Model()
        self.runs: list[Run] = []
        self.interval = 3
        #: Did the last rule touch the store? (starting or killing a run does not: no need
        #: to list it again, which on S3 is most of a step's requests)
        self.touched = True
        self.trace: list[str] = []

    # -- choosing ------------------------------------------------------------------------------
    def _pick(self, pick: int, fits: Callable[[Run], bool]) -> Run:
        runs = [r for r in self.runs if fits(r)]
        return runs[pick % len(runs)]

    def _any(self, fits: Callable[[Run], bool]) -> bool:
        return any(fits(r) for r in self.runs)

    @staticmethod
    def _writable(run: Run) -> bool:
        return run.idle and run.results is None

    @staticmethod
    def _committable(run: Run) -> bool:
        return run.idle and run.results is not None

    # -- rules -------------------------------------------------------------------------------------
    @initialize(interval=st.sampled_from([2, 3]))
    def choose_interval(self, interval: int) -> None:
        self.interval = interval

    @precondition(lambda self: sum(r.alive for r in self.runs) < MAX_LIVE_RUNS)
    @rule(second=st.booleans(), committer=st.integers(0, 5), replay=st.booleans(),
          first=st.integers(0, MAX_BATCH))
    def start_run(self, second: bool, committer: int, replay: bool, first: int) -> None:
        """A run of a query starts from its checkpoint (a restart: the others may live on)."""
        query = QUERIES[1] if second else QUERIES[0]
        self.trace.append(f"start({'second' if second else 'owner'}{', replay' if replay else ''})")
        # A query's first batch: 0, or any for the second query (its checkpoint is its own).
        start = self.model.start.setdefault(query, first if second else 0)
        known = self.model.checkpoint.get(query)
        batch = start if known is None else max(known - 1, start) if replay else known
        if batch > MAX_BATCH:
            return
        run = Run(f"run{len(self.runs)}", query, f"r{len(self.runs)}{uuid.uuid4().hex[:4]}",
                  self.target.committers[committer % len(self.target.committers)], batch)
        # Its own store, as a driver process has (a listing cached by another would not do).
        run.sink = StreamingSink(self.url, self.config, run.committer, compact_interval=self.interval,
                                 on_step=run.on_step)
        self.runs.append(run)

    @precondition(lambda self: self._any(StreamingMachine._writable))
    @rule(pick=st.integers(0, 7), tasks=st.integers(1, 2))
    def write(self, pick: int, tasks: int) -> None:
        """The run's tasks write its batch (nothing when the batch is committed already)."""
        self.touched = True
        self.trace.append("write")
        run = self._pick(pick, self._writable)
        assert run.sink is not None
        try:
            run.results = write_batch(run.sink, run.query, run.run_id, run.batch, tasks)
        except BatchLogError as exc:
            assert self.model.owner not in (None, run.query), f"{run.name} refused its own log: {exc}"
            assert "one streaming query per destination" in str(exc), exc
            run.alive = False  # the query fails: its tasks were refused before writing
            return
        if self.model.owner is None:
            self.model.owner = run.query  # its first task claimed the log
        elif EXPECT_REFUSAL:
            assert run.query == self.model.owner, \
                f"{run.name} of {run.query} wrote to the log of {self.model.owner}: not refused"
        self.model.written[run.query] = max(self.model.written.get(run.query, -1), run.batch)

    @precondition(lambda self: self._any(StreamingMachine._committable))
    @rule(pick=st.integers(0, 7), stop=st.sampled_from(STOPS))
    def commit(self, pick: int, stop: str | None) -> None:
        """The run's driver commits its batch, or stops at ``stop`` (resumed or killed later)."""
        self.touched = True
        self.trace.append(f"commit(stop at {stop})" if stop else "commit")
        run = self._pick(pick, self._committable)
        assert run.sink is not None and run.results is not None
        sink, batch, results = run.sink, run.batch, run.results
        jobs = {r.job_id for r in results if r.job_id is not None}
        for job_id in jobs:
            self.model.begun.setdefault(batch, set()).add(job_id)
            self.model.in_flight[job_id] = batch
        run.driver = Driver(run.name, stops={(stop, batch)} if stop else ())
        run.driver.start(lambda: sink.commit_batch(batch, results))
        if run.driver.done:
            self._reported(run)

    @precondition(lambda self: self._any(lambda r: r.stopped))
    @rule(pick=st.integers(0, 7), kill=st.booleans())
    def resume(self, pick: int, kill: bool) -> None:
        """A stopped driver goes on (it was only slow), or dies there."""
        self.touched = True
        self.trace.append("kill stopped" if kill else "resume")
        run = self._pick(pick, lambda r: r.stopped)
        assert run.driver is not None
        run.driver.resume(kill=kill)
        self._reported(run)

    @precondition(lambda self: self._any(StreamingMachine._committable))
    @rule(pick=st.integers(0, 7))
    def abort(self, pick: int) -> None:
        """Spark aborts the run's batch (a task failed for good); the query stops."""
        self.touched = True
        self.trace.append("abort")
        run = self._pick(pick, self._committable)
        assert run.sink is not None and run.results is not None
        run.sink.abort_batch(run.batch, run.results)
        run.alive = False

    @precondition(lambda self: self._any(lambda r: r.idle))
    @rule(pick=st.integers(0, 7))
    def kill(self, pick: int) -> None:
        """A driver dies between its calls (after its tasks wrote, or between batches)."""
        self.trace.append("kill")
        self._pick(pick, lambda r: r.idle).alive = False

    # -- what a commit reported ----------------------------------------------------------------------
    def _reported(self, run: Run) -> None:
        driver, model = run.driver, self.model
        assert driver is not None and driver.done
        run.driver, batch = None, run.batch
        jobs = {r.job_id for r in run.results or () if r.job_id is not None}
        run.results = None
        error = driver.error
        if isinstance(error, Killed):
            run.alive = False  # its job stays in flight until a later commit settles it
            return
        for job_id in jobs:
            model.in_flight.pop(job_id, None)
        if error is not None:
            run.alive = False
            if isinstance(error, BatchRolledBack):
                others = [r for r in self.runs if r.query == run.query and r is not run]
                assert others, f"{run.name} was rolled back with no other run of {run.query}: {error}"
            elif isinstance(error, BatchAlreadyCommitted):
                assert batch in model.begun and len(model.begun[batch]) > 1, error
            elif not (isinstance(error, BatchLogError) and run.query != model.owner
                      and "one streaming query per destination" in str(error)):
                raise error
            return
        entry = driver.result.entry
        assert entry.batch_id == batch
        known = model.committed.get(batch, entry.job_id)
        assert known == entry.job_id, f"batch {batch}: reported by {entry.job_id}, before by {known}"
        if not driver.result.replayed:
            assert entry.job_id in (jobs or {None}), f"{run.name} committed {entry.job_id}, not its job"
        model.committed[batch] = entry.job_id
        model.checkpoint[run.query] = max(model.checkpoint.get(run.query, 0), batch + 1)
        # Every record of this query up to this batch is settled now: rolled back or logged.
        stopped = {r.job_id for r in self.runs if r.stopped}
        for job_id, job_batch in list(model.in_flight.items()):
            if job_batch <= batch and job_id not in stopped:
                del model.in_flight[job_id]
        run.batch = batch + 1
        if run.batch > MAX_BATCH:
            run.alive = False

    # -- invariants ------------------------------------------------------------------------------------
    def _observe(self) -> tuple[list[streaming.BatchEntry], set[str]]:
        """The log's entries and the visible data files (one listing of the destination):
        a logged file that is not there is data loss."""
        entries = streaming.BatchLog(self.store, self.dest).entries()
        root = len(self.dest.rstrip("/")) + 1
        listed = {info.path[root:] for info in self.store.list_files(self.dest)}
        for entry in entries:
            gone = sorted(f.path for f in entry.files if f.path not in listed)
            assert not gone, f"data loss: batch {entry.batch_id} (job {entry.job_id}) names {gone}, gone"
        return entries, {p for p in listed if not hidden_from_readers(p)}

    @invariant()
    def the_store_is_the_models(self) -> None:
        if not self.touched:
            return
        self.touched = False
        model = self.model
        entries, visible = self._observe()
        logged = {e.batch_id: e for e in entries}
        for batch, job_id in model.committed.items():
            assert batch in logged, f"batch {batch} was reported committed (job {job_id}) and is not logged"
        for entry in entries:
            known = model.committed.get(entry.batch_id, entry.job_id)
            assert entry.job_id == known, f"batch {entry.batch_id} logged by {entry.job_id}, reported {known}"
            assert entry.job_id is None or entry.job_id in model.begun.get(entry.batch_id, ()), \
                f"batch {entry.batch_id} logged with job {entry.job_id}, whose commit never began"
            assert entry.query_id == model.owner, f"batch {entry.batch_id} of {entry.query_id}: not the owner"
            assert entry.job_id is None or entry.rows == ROWS, f"batch {entry.batch_id}: {entry.rows} rows"
            assert all(f"-{entry.job_id}-a" in f.path for f in entry.files), entry
            model.committed[entry.batch_id] = entry.job_id  # a stopped or killed commit's entry
        # Every visible data file is logged, or a file of a commit in flight or interrupted.
        for path in visible - {f.path for e in entries for f in e.files}:
            assert any(f"-{job_id}-a" in path for job_id in model.in_flight), \
                f"{path} is visible, not logged, and no commit of it is in flight"

    # -- the end ---------------------------------------------------------------------------------------
    def teardown(self) -> None:
        tried = type(self).tried
        tried.sequences.add(tuple(self.trace))
        tried.steps.update(self.trace)
        tried.examples += 1
        for run in self.runs:
            if run.stopped and run.driver is not None:
                run.driver.resume(kill=True)
        if self.model.owner is None:
            return
        self._catch_up(self.model.owner)
        self._check_the_end()

    def _catch_up(self, query: str) -> None:
        """A fresh run of the owner, with the store's default committer, replays every batch
        begun or written."""
        model = self.model
        first = model.checkpoint.get(query, model.start[query])
        last = max([*model.begun, model.written.get(query, -1), first])
        sink = StreamingSink(self.url, self.config, self.target.default,
                             compact_interval=self.interval, store=self.store)
        for batch in range(first, last + 1):
            results = write_batch(sink, query, "final", batch, 1)
            model.begun.setdefault(batch, set()).update(r.job_id for r in results if r.job_id)
            outcome = sink.commit_batch(batch, results)
            known = model.committed.get(batch, outcome.entry.job_id)
            assert outcome.entry.job_id == known, f"batch {batch}: {outcome.entry.job_id}, reported {known}"
            model.committed[batch] = outcome.entry.job_id
        self.touched = True
        self.the_store_is_the_models()

    def _check_the_end(self) -> None:
        entries, visible = self._observe()
        owner = self.model.owner
        assert owner is not None
        ids = [e.batch_id for e in entries]
        assert ids == list(range(ids[0], ids[0] + len(ids))), f"a batch is missing: {ids}"
        for entry in entries:
            ids: list[int] = []
            for f in entry.files:  # one GET each (a Parquet reader's ranged reads are several)
                data = self.store.read_bytes(self.store.join(self.dest, f.path))
                ids += pq.read_table(pa.BufferReader(data)).column("id").to_pylist()
            assert sorted(ids) == rows_of(owner, entry.batch_id).column("id").to_pylist(), \
                f"batch {entry.batch_id} holds other rows than its own"
        logged = {f.path for e in entries for f in e.files}
        assert visible == logged, f"visible and never logged: {sorted(visible - logged)}"
        # Spark's readers (configured with the sink's interval) see exactly the logged files.
        seen = spark_view(self.store, self.dest, default=self.interval)
        assert seen == sorted(logged), f"Spark's readers see {seen}, the log names {sorted(logged)}"
        left = leftovers(self.store, self.dest)
        assert left == [], f"temporary state left behind: {left}"
        records, decided = streaming.BatchLog(self.store, self.dest).job_states()
        assert records == [] and decided == [], f"left behind: records {records}, decisions {decided}"


# -- stores ------------------------------------------------------------------------------------------------

def _target(name: str, new_url: Callable[[], str], config: dict[str, Any]) -> Target:
    described = describe_capabilities(new_url(), config)
    return Target(name, new_url, config, tuple(described["safe_committers"]), described["default_committer"])


@pytest.fixture
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Target:
    name = request.param
    if name == "file":
        return _target(name, lambda: f"file://{tmp_path}/{uuid.uuid4().hex}/out", {})
    if name == "memory":
        return _target(name, lambda: f"memory://streaming-machine/{uuid.uuid4().hex}/out", {})
    if name == "s3":
        root, config = request.getfixturevalue("s3_root"), request.getfixturevalue("s3_config")
        return _target(name, lambda: f"{root}/{uuid.uuid4().hex}", dict(config))
    if name == "azure":
        server = request.getfixturevalue("azurite_server")
        server.create_container("streaming-machine")
        return _target(name, lambda: f"abfs://streaming-machine/{uuid.uuid4().hex}",
                       {**server.config(), "outcommit.manifest.retry-backoff-ms": "0"})
    # fake-gcs-server: it enforces ifGenerationMatch=0 (create-if-absent), which the batch
    # log and the decisions are built on; gcp-storage-emulator ignores it.
    server = request.getfixturevalue("fake_gcs_server")
    server.create_bucket("streaming-machine")
    return _target(name, lambda: f"gs://streaming-machine/{uuid.uuid4().hex}",
                   {**server.config(), "outcommit.manifest.retry-backoff-ms": "0"})


#: Examples per store in CI (x20 in make generative); each example is up to STEPS rules.
BUDGETS = {"file": 10, "memory": 150, "s3": 25, "azure": 3, "gcs": 3}
STEPS = 30
#: Fewer on the emulators' stores, where a rule costs tens of requests.
STEPS_ON = {"s3": 20, "azure": 20, "gcs": 20}


LONG_ONLY = pytest.mark.skipif(not long_run(), reason="the emulators' stores run in make generative")


@pytest.mark.generative
@pytest.mark.parametrize("target", [
    "file", "memory",
    pytest.param("s3", marks=pytest.mark.s3),
    pytest.param("azure", marks=[pytest.mark.azure, LONG_ONLY]),
    pytest.param("gcs", marks=[pytest.mark.gcs, LONG_ONLY]),
], indirect=True)
def test_streaming_sink_against_its_model(target: Target, tried_report: Any) -> None:
    machine = type(f"StreamingMachine_{target.name}", (StreamingMachine,),
                   {"target": target, "tried": Tried()})
    steps = STEPS_ON.get(target.name, STEPS)
    try:
        run_state_machine_as_test(machine, settings=budget(BUDGETS[target.name], stateful_step_count=steps))
    finally:
        tried_report(machine)
