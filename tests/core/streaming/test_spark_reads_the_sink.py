"""Spark's own readers on the sink's destinations (issue 29): ``spark.read.parquet(dest)`` and
``spark.readStream.parquet(dest)`` see exactly the committed batches, through the
``_spark_metadata`` log the sink keeps, as for Spark's own file sink.

Spark reaches only ``file://`` here (pip's PySpark has no S3, GCS or Azure connector), so
Spark reads local destinations; what it would read on the other stores is checked without
Spark by ``spark_view`` (Spark's algorithm) in every streaming test's oracle. One driver
process (``spark_reads.py``) does every Spark read of this module.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from batches import batch_table, run_batch
from spark_view import spark_view

from outcommit import open_store
from outcommit.streaming import StreamingSink
from outcommit.testing.conformance import visible_files

pytestmark = [pytest.mark.spark]
pytest.importorskip("pyspark", minversion="4.1")
if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
    pytest.skip("PySpark tests need Java: apt-get install -y openjdk-17-jre-headless",
                allow_module_level=True)

HERE = Path(__file__).resolve().parent
RUN_DEADLINE_S = 600.0
STREAM_FILES = 5  # micro-batches of the real query; compactInterval 2: compactions 1 and 3


class Died(BaseException):
    """The driver 'dies' at a step: nothing after it runs."""


def interrupted_destination(root: Path) -> str:
    """Batches 0 and 1 committed; batch 2's job commit published its files and the driver
    died before the log entry: those files sit in the destination, visible to a listing."""
    url = f"file://{root}/interrupted"

    def die(step: str, batch_id: int) -> None:
        if (step, batch_id) == ("job-committed", 2):
            raise Died

    sink = StreamingSink(url, {}, "v1", on_step=die)
    for batch_id in range(2):
        sink.commit_batch(batch_id, run_batch(sink, "run-a", batch_id))
    with pytest.raises(Died):
        sink.commit_batch(2, run_batch(sink, "run-a", 2))
    store = open_store(url)
    assert any("-b2-" in p for p in visible_files(store, store.strip(url))), "batch 2 published nothing"
    return url


def stream_spec(root: Path) -> dict[str, Any]:
    source = root / "input"
    source.mkdir()
    for k in range(STREAM_FILES):
        path = source / f"in-{k:03d}.parquet"
        pq.write_table(pa.table({"id": pa.array(range(k * 100, k * 100 + 40), pa.int64()),
                                 "part": pa.array([i % 2 for i in range(40)], pa.int64())}), path)
        os.utime(path, (1_700_000_000 + k, 1_700_000_000 + k))  # one file per batch, in order
    return {"input": str(source), "checkpoint": str(root / "ckpt"), "dest": f"file://{root}/stream",
            "native": f"file://{root}/native", "nativeCheckpoint": str(root / "native-ckpt"),
            "options": {"partitionBy": "part", "maxRowsPerFile": "10", "compactInterval": "2"}}


@pytest.fixture(scope="module")
def spark_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("spark-reads")
    interrupted = interrupted_destination(root)
    spec = {"read": [interrupted], "stream": stream_spec(root)}
    (root / "spec.json").write_text(json.dumps(spec))
    done = subprocess.run([sys.executable, str(HERE / "spark_reads.py"), str(root / "spec.json")],
                          capture_output=True, text=True, timeout=RUN_DEADLINE_S, cwd=root)
    assert done.returncode == 0, (done.stdout + done.stderr)[-6000:]
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith('{"event"')]
    return {"root": root, "interrupted": interrupted, "spec": spec,
            "events": {e["event"]: e for e in events}}


def test_spark_read_sees_only_the_committed_batches_beside_an_interrupted_ones_files(
        spark_results: dict[str, Any]) -> None:
    """Batch 2's files are in the directory (its driver died before the log entry): Spark's
    reader listed them and read rows no batch committed. Through _spark_metadata it reads
    exactly batches 0 and 1."""
    read = spark_results["events"]["read"]
    expected = sorted(i for b in range(2) for i in batch_table(b).column("id").to_pylist())
    assert read["ids"] == expected
    assert read["columns"] == ["id", "part"]
    # Then the restart rolls batch 2 back, replays it, and Spark's log has it.
    url = spark_results["interrupted"]
    sink = StreamingSink(url, {}, "v1")
    sink.commit_batch(2, run_batch(sink, "run-b", 2))
    store = open_store(url)
    logged = sorted(visible_files(store, store.strip(url)))
    assert spark_view(store, store.strip(url)) == logged


def test_spark_reads_a_streaming_querys_output_as_it_reads_its_file_sinks(
        spark_results: dict[str, Any]) -> None:
    """A real query through the sink (5 micro-batches, compactions at 1 and 3), read back with
    spark.read.parquet and spark.readStream.parquet: every row once, partition column included."""
    events = spark_results["events"]
    expected = sorted(i for k in range(STREAM_FILES) for i in range(k * 100, k * 100 + 40))
    assert events["stream-read"]["ids"] == expected
    assert events["stream-read"]["columns"] == ["id", "part"]
    assert events["stream-readStream"]["ids"] == expected


def test_the_sinks_spark_metadata_is_shaped_as_spark_writes_it(spark_results: dict[str, Any]) -> None:
    """Same file names for the same batches and interval, the version line, the same fields
    and path form as Spark's own file sink wrote for the same input."""
    root = spark_results["root"]
    ours = sorted(p.name for p in (root / "stream" / "_spark_metadata").iterdir())
    assert ours == ["1.compact", "2", "3.compact", "4"], ours  # 0 went with compaction 3
    native_dir = root / "native" / "_spark_metadata"
    native_lines = (native_dir / "0").read_text().splitlines()
    our_lines = (root / "stream" / "_spark_metadata" / "4").read_text().splitlines()
    assert our_lines[0] == native_lines[0] == "v1"
    native, mine = json.loads(native_lines[1]), json.loads(our_lines[1])
    assert list(mine) == list(native)
    assert {k: v for k, v in mine.items() if k not in ("path", "size", "modificationTime")} == \
        {k: v for k, v in native.items() if k not in ("path", "size", "modificationTime")}
    assert mine["path"].startswith(f"file://{root}/stream/part=")
    assert native["path"].startswith(f"file://{root}/native/")  # Spark 4.3's own form
    # Each line names a real file of its size.
    store = open_store(f"file://{root}/stream")
    for line in our_lines[1:]:
        status = json.loads(line)
        assert os.path.getsize(status["path"].removeprefix("file://")) == status["size"]
    assert spark_view(store, f"{root}/stream") == sorted(visible_files(store, f"{root}/stream"))
