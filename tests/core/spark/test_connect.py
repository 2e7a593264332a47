"""df.write.format("outcommit") through Spark Connect: a server started by pyspark's own
sbin/start-connect-server.sh on 127.0.0.1, a client session in another process."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from docblocks import blocks
from outcommit import load_success, open_store
from outcommit.read import dataset

pytestmark = pytest.mark.spark

CLIENT = Path(__file__).with_name("connect_client.py")
READER = Path(__file__).with_name("connect_reader.py")
DOCS_BLOCK = Path(__file__).with_name("connect_docs_block.py")
CONNECT_BLOCK = 'docs/pyspark.md: spark = SparkSession.builder.remote("sc://spark-connect.internal:15002").getOrCreate()'


@pytest.fixture(scope="module")
def connect_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    pytest.importorskip("zstandard", reason="Spark Connect clients need pyspark[connect]")
    from outcommit_devtools.sparkconnect import start_connect_server

    with start_connect_server(tmp_path_factory.mktemp("connect")) as server:
        yield server


def test_a_write_through_spark_connect_commits_and_reports(connect_server: Any, tmp_path: Path) -> None:
    destination = f"file://{tmp_path}/connect events"
    done = subprocess.run([sys.executable, str(CLIENT), connect_server.url, destination],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["session"] == "pyspark.sql.connect.session"       # a Connect client, not classic
    assert seen["rows"] == 3000
    assert seen["hidden"].endswith(
        "outcommit.errors.OptionError: Spark Connect does not show spark.hadoop.fs.s3a.secret.key to its "
        "clients (spark.redaction.regex), so outcommit.spark.register(spark) could not pass it on to the "
        "driver's steps: give it as an option of the write or read instead (.option(name, value), any "
        "spelling the session uses)")
    assert seen["given"] == 3000
    assert seen["typo"].endswith(
        "outcommit.errors.OptionError: unknown write option 'partitonby' (did you mean partitionBy?): "
        "the outcommit data source takes path, format, committer, partitionBy, conflictMode, "
        "maxRowsPerFile, maxBytesPerFile, rowGroupSize, compression, and configuration keys "
        "starting with outcommit., spark.outcommit., spark.hadoop., fs., mapreduce.")
    store = open_store(destination)
    report = load_success(store, store.join(store.strip(destination), "_SUCCESS"))
    assert report.committer == "v1" and report.metrics["rows.written"] == 3000
    assert report.metrics["spark.tasks"] == 3
    files = [f.path for f in store.list_files(store.strip(destination))]
    assert not any("_temporary" in f for f in files)
    assert {f.split("/")[-2] for f in files if f.endswith(".parquet")} == {
        "date=2026-11-01", "date=2026-11-02", "date=2026-11-03"}


def test_without_register_the_server_finds_the_data_source_and_reads_back(connect_server: Any,
                                                                          tmp_path: Path) -> None:
    """The client never calls outcommit.spark.register: the server's Spark finds the data
    source by its package (pyspark_outcommit), writes, and reads the committed files back."""
    destination = f"file://{tmp_path}/connect read"
    done = subprocess.run([sys.executable, str(READER), connect_server.url, destination],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen == {"session": "pyspark.sql.connect.session", "schema": "struct<id:bigint,date:date>",
                    "rows": 3000, "first_day": 1000, "ids": sum(range(3000))}


@pytest.mark.s3
def test_the_pages_connect_block_runs_as_written(moto_server: Any, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/pyspark.md's Spark Connect block writes to S3 through a server whose environment
    points AWS's SDKs at the moto server (as a server's environment carries credentials,
    which Connect does not show its clients); only the address and the bucket are renamed."""
    pytest.importorskip("zstandard", reason="Spark Connect clients need pyspark[connect]")
    from outcommit_devtools.sparkconnect import start_connect_server

    bucket = f"docs-{uuid.uuid4().hex[:12]}"
    moto_server.create_bucket(bucket)
    for name, value in {"AWS_ENDPOINT_URL": moto_server.endpoint_url, "AWS_ACCESS_KEY_ID": "testing",
                        "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(name, value)   # the server's and the client's environment
    with start_connect_server(tmp_path / "server") as server:
        source = blocks()[CONNECT_BLOCK].source
        block = tmp_path / "block.py"
        block.write_text(source.replace("sc://spark-connect.internal:15002", server.url)
                         .replace("s3://bucket/", f"s3://{bucket}/"))
        done = subprocess.run([sys.executable, str(DOCS_BLOCK), server.url, str(block)],
                              capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"session": "pyspark.sql.connect.session"}
    written = dataset(f"s3://{bucket}/events", moto_server.config).to_table()
    assert written.num_rows == 300 and sorted(set(written.column("date").to_pylist())) == [
        "2026-11-01", "2026-11-02", "2026-11-03"]
