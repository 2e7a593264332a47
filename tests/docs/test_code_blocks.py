"""Every Python block of the docs that touches a store runs here as written, against the
emulators: the page's text is executed, with only its bucket renamed to a fresh one and
``file:///tmp/`` (``/data/``) moved into the test's directory. S3 blocks read their endpoint
and keys from the environment variables AWS's SDKs read (``AWS_ENDPOINT_URL``, ...), set
to the moto server, as a user of an S3-compatible store sets them; the S3 pages say so.

Each block is named by its page and first line (tests/docblocks.py). Every block must be
listed below: run here (RUN), run by another test (ELSEWHERE), or touching no store
(NO_STORE); a new block fails ``test_every_block_is_accounted_for`` until it is.
"""

from __future__ import annotations

import ast
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import outcommit
from docblocks import RUN_IN_SPARK_TESTS, blocks


@dataclass(frozen=True)
class Run:
    store: str                    # file, s3, gcs, azure, as-is (the block starts its own server)
    setup: str = ""               # run first, in the block's namespace (what the page assumes)
    check: str = ""               # run after it: what the block must have done
    marks: tuple[Any, ...] = field(default_factory=tuple)


WRITE_EVENTS = """
import pyarrow as pa
outcommit.write_dataset(pa.table({"id": [1, 2, 3], "date": ["2026-11-01", "2026-11-02", "2026-11-01"]}),
                        "s3://bucket/events", partitioning=["date"])
"""
OPEN_TASK = """
import pandas as pd, pyarrow as pa, pyarrow.parquet
committer = outcommit.create_committer("s3://bucket/table")
job = outcommit.JobContext("s3://bucket/table"); committer.setup_job(job)
task = job.task_attempt(index=0); committer.setup_task(task)
table, df = pa.table({"id": [1, 2]}), pd.DataFrame({"id": [3]})
"""
CRASHED_JOB = OPEN_TASK + """
with committer.filesystem(task).open(committer.work_path(task) + "/part-0.csv", "wb") as f:
    f.write(b"id\\n1\\n")
committer.commit_task(task)            # then the driver dies: its uploads stay pending
crashed = job.job_id
"""
RAW_CSV = """
import s3fs
raw = s3fs.S3FileSystem()
raw.pipe("bucket/raw/a.csv", b"id,date\\n1,2026-11-01\\n2,2026-11-02\\n")
raw.pipe("bucket/raw/b.csv", b"id,date\\n3,2026-11-01\\n")
"""
#: A streaming destination: three micro-batches through the sink (the page's query would).
STREAM_EVENTS = """
import pyarrow as pa
from outcommit.engine.tasks import WriteSettings, write_attempt
from outcommit.streaming import BatchIdentity, BatchTaskResult, StreamingSink
url, config = "s3://bucket/events", {}
sink = StreamingSink(url, config)
for batch in range(3):
    identity = BatchIdentity("query-1", batch, "run-1")
    job = sink.begin_task(identity)
    rows = pa.table({"id": [batch * 10, batch * 10 + 1], "date": ["2026-11-01", "2026-11-02"]})
    attempt = write_attempt(sink.committer, job.task_attempt(0, 0), rows.to_batches(),
                            WriteSettings(partition_by=("date",)))
    sink.commit_batch(batch, [BatchTaskResult(identity, job.job_id, attempt)])
"""
#: The Parquet files the Ray page reads, and a local Ray (its workers inherit the AWS_*
#: variables that point pyarrow's and outcommit's S3 clients at the moto server).
RAY_RAW = """
import ray, s3fs, pyarrow as pa, pyarrow.parquet as pq
raw = s3fs.S3FileSystem()
for day in ("2026-11-01", "2026-11-02"):
    with raw.open(f"bucket/raw/{day}.parquet", "wb") as f:
        pq.write_table(pa.table({"id": [1, 2], "date": [day, day]}), f)
ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False,
         object_store_memory=128 * 1024 * 1024)
ray.data.DataContext.get_current().enable_progress_bars = False
"""
NO_PENDING = """
store = outcommit.open_store("s3://bucket/table")
assert store.multipart().list_pending(store.strip("s3://bucket/table") + "/") == []
"""

RUN: dict[str, Run] = {
    "README.md: import outcommit": Run("file"),
    "README.md: import polars as pl": Run("file"),
    "docs/protocol.md: import outcommit": Run("file"),
    "docs/plugins.md: import outcommit": Run("file"),
    "docs/local-engine.md: import duckdb": Run("s3", check="assert result.committer == 'magic'"),
    "docs/local-engine.md: import pyarrow as pa": Run("s3", check="assert result.rows == 4"),
    "docs/reading.md: import os": Run("s3", setup=WRITE_EVENTS, check="assert rows[0] == 3"),
    "docs/s3.md: import outcommit": Run("s3", check="assert committer.name == 'partitioned'"),
    "docs/s3.md: fs, base = committer.filesystem(task), committer.work_path(task)": Run(
        "s3", setup=OPEN_TASK,
        check="import outcommit.read; committer.commit_job(job, [committer.commit_task(task)]); "
              "assert len(outcommit.read.committed_files('s3://bucket/table')) == 2"),
    'docs/s3.md: outcommit.create_committer("s3://bucket/table").abort_job(': Run(
        "s3", setup=CRASHED_JOB, check=NO_PENDING),
    "docs/success.md: from outcommit import open_store, load_success": Run(
        "s3", setup=WRITE_EVENTS.replace("events", "table")),
    "docs/streaming.md: import outcommit.streaming as oc": Run(
        "s3", setup=STREAM_EVENTS,
        check="assert len(files) == 6 and oc.dataset(url, config).to_table().num_rows == 6"),
    "docs/ray.md: import ray": Run(
        "s3", setup=RAY_RAW,
        check="ray.shutdown(); assert sink.summary.success and sink.summary.metrics['rows.written'] == 4"),
    "docs/dask.md: import dask.dataframe as dd": Run("s3", setup=RAW_CSV,
                                                     check="assert result.summary.success"),
    "docs/gcs.md: import outcommit": Run("gcs", check="assert committer.name == 'manifest'"),
    "docs/azure.md: from outcommit_azure.emulator import start_azurite": Run(
        "as-is", marks=(pytest.mark.azure,)),
    "docs/gcs.md: from outcommit_gcs.emulator import start_gcs_emulator": Run(
        "as-is", marks=(pytest.mark.gcs,)),
    "docs/gcs.md: from outcommit_gcs.emulator import start_fake_gcs_server": Run(
        "as-is", marks=(pytest.mark.gcs,)),
    "docs/s3.md: from outcommit_s3.embedded import start_moto_server   # the 'outcommit-s3[embedded]' extra":
        Run("as-is", marks=(pytest.mark.s3,)),
}

ELSEWHERE: dict[str, str] = {
    "docs/plugins.md: # file: src/outcommit_dirstore/store.py": "tests/docs/test_plugin_from_docs.py",
    "docs/plugins.md: # file: src/outcommit_dirstore/plugin.py": "tests/docs/test_plugin_from_docs.py",
    "docs/plugins.md: # file: src/outcommit_dirstore/__init__.py": "tests/docs/test_plugin_from_docs.py",
    "docs/plugins.md: # file: tests/test_dirstore.py": "tests/docs/test_plugin_from_docs.py",
    "docs/streaming.md: import duckdb": "tests/core/streaming/test_streaming_sink.py (the DuckDB recipe)",
    "docs/streaming.md: spark.read.parquet(url)                       # exactly the committed batches":
        "tests/core/streaming/test_spark_reads_the_sink.py (both reads, with Spark)",
    'docs/pyspark.md: spark = SparkSession.builder.remote("sc://spark-connect.internal:15002").getOrCreate()':
        "tests/core/spark/test_connect.py (a Connect server whose environment points at the moto server)",
    "docs/streaming.md: files = outcommit.streaming.committed_files(url)":
        "tests/core/streaming/test_spark_streaming_killed.py (stream_query.py runs the recipe on file://)",
    **{name: "tests/core/spark/test_spark_docs.py" for name in RUN_IN_SPARK_TESTS},
}

#: Blocks that touch a store but need what no test here starts for them (a streaming query's
#: destination, a Spark Connect server at the page's address, a Ray cluster): not run as
#: written yet.
NOT_RUN: dict[str, str] = {
    "docs/pyspark.md: # Spark's own S3A connector": "Maven Central (spark.jars.packages), not reachable here",
}

NO_STORE: dict[str, str] = {
    "docs/configuration.md: class Fields(logging.Formatter):": "a logging formatter",
    "docs/pyspark.md: spark = (SparkSession.builder": "session configuration",
    "docs/pyspark.md: import os, sys": "session configuration",
    "docs/s3.md: spark = (SparkSession.builder": "session configuration",
}


def test_every_block_is_accounted_for() -> None:
    listed = [*RUN, *ELSEWHERE, *NOT_RUN, *NO_STORE]
    assert len(listed) == len(set(listed))
    assert sorted(blocks()) == sorted(listed)


@pytest.fixture
def aws_environment(moto_server: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    """The variables a user of an S3-compatible store sets, pointing at the moto server;
    a fresh bucket, to which the page's ``bucket`` is renamed."""
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_server.endpoint_url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    bucket = f"docs-{uuid.uuid4().hex[:12]}"
    moto_server.create_bucket(bucket)
    return bucket


@pytest.fixture
def gcs_environment(gcs_server: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    """gcsfs's own variable for an emulator, and a fresh bucket."""
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs_server.endpoint)
    bucket = f"docs-{uuid.uuid4().hex[:12]}"
    gcs_server.create_bucket(bucket)
    return bucket


def _param(name: str) -> Any:
    run = RUN[name]
    marks = {"s3": (pytest.mark.s3,), "gcs": (pytest.mark.gcs,)}.get(run.store, ())
    return pytest.param(name, marks=[*marks, *run.marks], id=name)


def imported_packages(source: str) -> list[str]:
    """The top-level packages a block imports (``import polars as pl`` -> ``polars``)."""
    tree = ast.parse(source)
    names = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    names |= {node.module for node in ast.walk(tree)
              if isinstance(node, ast.ImportFrom) and node.module and not node.level}
    return sorted({name.split(".")[0] for name in names})


@pytest.mark.parametrize("name", [_param(n) for n in sorted(RUN)])
def test_the_block_runs_as_written(name: str, request: pytest.FixtureRequest, tmp_path: Path,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    block, run = blocks()[name], RUN[name]
    for module in imported_packages(block.source):
        pytest.importorskip(module)  # the block's reader (tox -e min has no polars, dask, duckdb)
    rename: dict[str, str] = {}
    if run.store == "file":
        rename = {"file:///tmp/": f"file://{tmp_path}/", "file:///data/": f"file://{tmp_path}/"}
    elif run.store == "s3":
        rename = {"s3://bucket/": f"s3://{request.getfixturevalue('aws_environment')}/",
                  '"bucket/': f'"{request.getfixturevalue("aws_environment")}/'}
    elif run.store == "gcs":
        rename = {"gs://bucket/": f"gs://{request.getfixturevalue('gcs_environment')}/"}
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {"__name__": "__docs__", "outcommit": outcommit}
    for part, text in (("setup", run.setup), ("block", block.source), ("check", run.check)):
        for old, new in rename.items():
            text = text.replace(old, new)
        source = text.replace('"<crashed job id>"', "crashed")   # the job CRASHED_JOB left
        exec(compile(source, f"{block.page}:{block.line} ({part})", "exec"), namespace)
