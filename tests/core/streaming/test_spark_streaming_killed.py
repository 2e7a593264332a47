"""A real Structured Streaming query whose driver is SIGKILLed mid-batch, restarted from its checkpoint.

Each run of ``stream_query.py`` is a separate driver (Python, its JVM, its Python
workers: one process group). A test hook of the sink (``_pauseAt``) holds the query at a
chosen point and marks it reached; the test then kills the whole group with SIGKILL (no
shutdown hook runs, nothing is aborted) and starts the query again from the same
checkpoint. Points, in the order one query meets them:

- ``write:0`` — batch 0's tasks have written a file (for ``magic`` an upload is pending);
- ``commit-job-committed:1`` — batch 1's job commit made its files visible, no log entry yet
  (the restart must roll them back: the replay writes the batch again);
- ``commit-logged:2`` — batch 2's log entry (the first compaction) exists, Spark's
  checkpoint has not recorded the commit, nor the sink its ``_spark_metadata/2.compact``
  (the restart replays batch 2: nothing new may become visible, and the replay writes
  Spark's file, which ``spark.read.parquet(dest)`` at the end reads through).

The oracle, per batch: the rows Spark's checkpoint says the batch read (its source log
names the input file) are exactly the rows of the batch's log entry; the destination's
data files are exactly the logged ones; no temporary state, job record or pending upload
is left.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import outcommit.streaming as streaming
from outcommit import open_store
from outcommit.streaming.spark_metadata import SparkMetadata
from outcommit.testing.conformance import leftovers, visible_files
from outcommit_devtools.sparkcluster import wait_until

S3_BUCKET = "outcommit-test"  # tests/conftest.py's bucket (the s3_server fixture creates it)

pytestmark = [pytest.mark.spark]
pytest.importorskip("pyspark", minversion="4.1")
if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
    pytest.skip("PySpark tests need Java: apt-get install -y openjdk-17-jre-headless",
                allow_module_level=True)

HERE = Path(__file__).resolve().parent
ROWS_PER_FILE = 1200  # per batch: 2 tasks x 3 partitions x 2 files of 100 rows
REACH_DEADLINE_S = 300.0
RUN_DEADLINE_S = 420.0


PAUSES = ["write:0", "commit-job-committed:1", "commit-logged:2"]
FILES = 3  # batch 2 is also the log's first compaction (compactInterval=3)
COMPACT_INTERVAL = 3


@dataclass
class Query:
    """One streaming query: its input, checkpoint and destination, run again and again."""

    name: str
    tmp: Path
    dest: str
    config: dict[str, str]
    files: int = FILES

    @property
    def input(self) -> Path:
        return self.tmp / "input"

    @property
    def checkpoint(self) -> Path:
        return self.tmp / "checkpoint"

    @property
    def hooks(self) -> Path:
        return self.tmp / "hooks"

    def make_input(self) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        self.input.mkdir(parents=True)
        self.hooks.mkdir()
        for k in range(self.files):
            ids = list(range(k * 10_000, k * 10_000 + ROWS_PER_FILE))
            table = pa.table({"id": pa.array(ids, pa.int64()),
                              "part": pa.array([i % 3 for i in ids], pa.int64()),
                              "payload": [f"row-{i}" for i in ids]})
            path = self.input / f"in-{k:03d}.parquet"
            pq.write_table(table, path)
            os.utime(path, (1_700_000_000 + k, 1_700_000_000 + k))  # one file per batch, in order

    def spec(self, pause: str | None) -> dict[str, Any]:
        options = {**self.config, "partitionBy": "part", "maxRowsPerFile": "100",
                   "compactInterval": str(COMPACT_INTERVAL)}
        if pause:
            options.update({"_pauseAt": pause, "_hooksDir": str(self.hooks)})
        return {"input": str(self.input), "checkpoint": str(self.checkpoint), "dest": self.dest,
                "options": options}

    def reached(self, pause: str) -> bool:
        point, _, batch = pause.rpartition(":")
        return (self.hooks / f"{point}-{batch}.reached").exists()

    def batch_inputs(self) -> dict[int, list[int]]:
        """Batch id -> the ids of the input file(s) Spark's checkpoint says the batch read."""
        import pyarrow.parquet as pq

        out = {}
        for entry in (self.checkpoint / "sources" / "0").iterdir():
            if not entry.name.isdigit():
                continue
            lines = entry.read_text().splitlines()[1:]  # "v1", then one JSON line per file
            ids: list[int] = []
            for line in lines:
                path = json.loads(line)["path"].removeprefix("file://")
                ids += pq.read_table(path).column("id").to_pylist()
            out[int(entry.name)] = sorted(ids)
        return out


class Driver:
    """Runs every query in one driver process: held at a pause and killed, or to the end."""

    def __init__(self, tmp: Path, queries: list[Query]) -> None:
        self.tmp = tmp
        self.queries = queries
        self.runs = 0

    def start(self, pause: str | None) -> tuple[subprocess.Popen[bytes], Path]:
        self.runs += 1
        spec, log = self.tmp / f"run-{self.runs}.json", self.tmp / f"run-{self.runs}.log"
        spec.write_text(json.dumps([q.spec(pause) for q in self.queries]))
        with open(log, "wb") as out:
            process = subprocess.Popen([sys.executable, str(HERE / "stream_query.py"), str(spec)],
                                       stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                       start_new_session=True, cwd=self.tmp)
        return process, log

    def run_killed_at(self, pause: str) -> None:
        """Start the queries, wait until every one holds at ``pause``, SIGKILL the process group."""
        process, log = self.start(pause)
        try:
            wait_until(lambda: all(q.reached(pause) for q in self.queries) or process.poll() is not None,
                       REACH_DEADLINE_S, f"every query to reach {pause}")
            assert all(q.reached(pause) for q in self.queries), \
                f"the driver ended before {pause}:\n{log.read_text()[-4000:]}"
        finally:
            kill_group(process)

    def run_to_the_end(self) -> list[dict[str, Any]]:
        """Run until every query has read all its input; the driver's JSON events."""
        process, log = self.start(None)
        try:
            code = process.wait(timeout=RUN_DEADLINE_S)
        finally:
            kill_group(process)
        assert code == 0, log.read_text()[-6000:]
        return [json.loads(line) for line in log.read_text().splitlines() if line.startswith('{"event"')]


def kill_group(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL the driver's process group and wait until every process of it is gone."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait(timeout=60)

    def gone() -> bool:
        try:
            os.killpg(process.pid, 0)
        except ProcessLookupError:
            return True
        return False

    wait_until(gone, 60, f"process group {process.pid} to exit")


def batch_outputs(url: str, config: dict[str, str]) -> dict[int, list[int]]:
    """Batch id -> the ids in the files its log entry names."""
    import pyarrow.dataset as ds

    store = open_store(url, config)
    dest = store.strip(url)
    out = {}
    for entry in streaming.committed_batches(url, config):
        paths = [store.join(dest, f.path) for f in entry.files]
        table = ds.dataset(paths, filesystem=store.fs, format="parquet", partitioning="hive",
                           partition_base_dir=dest).to_table(columns=["id"])
        out[entry.batch_id] = sorted(table.column("id").to_pylist())
        assert entry.rows == table.num_rows
    return out


def assert_exactly_once(query: Query) -> dict[int, tuple[int, int]]:
    """Per batch rows in == rows out (same ids); only logged files; nothing left behind."""
    inputs = query.batch_inputs()
    outputs = batch_outputs(query.dest, query.config)
    assert sorted(inputs) == list(range(query.files))
    assert outputs == inputs
    store = open_store(query.dest, query.config)
    dest = store.strip(query.dest)
    logged = {f.path for e in streaming.committed_batches(query.dest, query.config) for f in e.files}
    assert set(visible_files(store, dest)) == logged, "data files that no committed batch names"
    assert leftovers(store, dest) == []
    assert streaming.BatchLog(store, dest).jobs() == []
    return {b: (len(inputs[b]), len(outputs[b])) for b in inputs}


def check_killed_state(query: Query, pause: str) -> str:
    """What the kill at ``pause`` left behind, checked and described."""
    store = open_store(query.dest, query.config)
    dest = store.strip(query.dest)
    point, _, batch = pause.rpartition(":")
    if point == "write":
        left = leftovers(store, dest)
        assert left, f"the killed batch {batch} left nothing to clean up"
        pending = sum(1 for p in left if p.startswith("pending upload"))
        if query.name == "s3":
            assert pending, f"magic: no upload of batch {batch} pending at the kill: {left}"

        return f"{len(left)} temporary entries ({pending} pending uploads)"
    if point == "commit-job-committed":
        published = [p for p in visible_files(store, dest) if f"-b{batch}-" in p]
        assert published, f"batch {batch}'s job commit published nothing"
        assert streaming.BatchLog(store, dest).get(int(batch)) is None
        return f"{len(published)} files of batch {batch} visible, not in the log"
    assert streaming.BatchLog(store, dest).get(int(batch)) is not None
    # Killed before the sink wrote the batch's file in Spark's log: the replay must.
    spark_file = SparkMetadata(store, dest, COMPACT_INTERVAL).path(int(batch))
    assert not store.exists(spark_file), f"{spark_file} was written before the kill"
    return f"batch {batch} in the log, not in Spark's checkpoint nor in _spark_metadata"


@pytest.fixture(scope="module")
def killed_queries(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
                   ) -> dict[str, tuple[Query, list[str]]]:
    """Every selected store's query, killed at each pause in turn, then run to the end."""
    selected = {item.name for item in request.session.items if item.module is request.module}
    root = tmp_path_factory.mktemp("streams")
    queries = []
    if any(name.endswith("_file") for name in selected):
        queries.append(Query("file", root / "file", f"file://{root}/file/out", {}))
    if any(name.endswith("_s3") for name in selected):
        moto = request.getfixturevalue("s3_server")
        queries.append(Query("s3", root / "s3", f"s3://{S3_BUCKET}/stream-{root.name}",
                             {k: str(v) for k, v in moto.config.items()}))
    if any(name.endswith("_azurite") for name in selected):
        azurite = request.getfixturevalue("azurite_server")
        azurite.create_container("stream-tests")
        queries.append(Query("azure", root / "azure", f"abfs://stream-tests/{root.name}", azurite.config()))
    for query in queries:
        query.make_input()
    driver = Driver(root, queries)
    notes: dict[str, list[str]] = {q.name: [] for q in queries}
    for pause in PAUSES:
        driver.run_killed_at(pause)
        for query in queries:
            notes[query.name].append(f"killed at {pause}: {check_killed_state(query, pause)}")
    events = driver.run_to_the_end()
    for query in queries:
        read = [e for e in events if e["event"] == "spark-read" and e["dest"] == query.dest]
        if read:
            notes[query.name].append(f"spark.read.parquet(*committed_files(dest)): {read[0]['rows']} rows, "
                                     f"{read[0]['distinct']} distinct ids, columns {read[0]['columns']}")
            assert (read[0]["rows"], read[0]["distinct"]) == (FILES * ROWS_PER_FILE, FILES * ROWS_PER_FILE)
            assert read[0]["columns"] == ["id", "part", "payload"]
            # spark.read.parquet(dest): Spark's log, its compaction written by batch 2's replay
            # (the first run was killed between batch 2's entry and its _spark_metadata file).
            notes[query.name].append(f"spark.read.parquet(dest): {read[0]['dirRows']} rows, "
                                     f"{read[0]['dirDistinct']} distinct ids")
            whole = FILES * ROWS_PER_FILE
            assert (read[0]["dirRows"], read[0]["dirDistinct"]) == (whole, whole)
            assert read[0]["dirColumns"] == ["id", "part", "payload"]
    return {q.name: (q, notes[q.name]) for q in queries}


def check(killed: dict[str, tuple[Query, list[str]]], name: str) -> None:
    query, notes = killed[name]
    counts = assert_exactly_once(query)
    store = open_store(query.dest, query.config)
    batch_log = streaming.BatchLog(store, store.strip(query.dest))
    listing = sorted(i.name for i in store.list_dir(batch_log.dir) if not i.is_dir)
    batches = [f"batch {e.batch_id}: {len(e.files)} files, {e.rows} rows ({e.committer}, job {e.job_id})"
               for e in batch_log.entries()]
    print(f"\n{query.dest}:\n  " + "\n  ".join(notes) +
          f"\n  batch log: {', '.join(listing)}; job records: {len(batch_log.jobs())}"
          "\n  " + "\n  ".join(batches) +
          f"\n  rows in/out per batch: {dict(sorted(counts.items()))}; total in "
          f"{sum(i for i, _ in counts.values())}, out {sum(o for _, o in counts.values())}")


def test_killed_driver_restarts_exactly_once_on_file(killed_queries: Any) -> None:
    check(killed_queries, "file")
    assert any("spark.read" in note for note in killed_queries["file"][1]), "Spark never read the output"


@pytest.mark.s3
def test_killed_driver_restarts_exactly_once_on_s3(killed_queries: Any) -> None:
    check(killed_queries, "s3")


@pytest.mark.azure
def test_killed_driver_restarts_exactly_once_on_azurite(killed_queries: Any) -> None:
    check(killed_queries, "azure")
