"""Shared test configuration: plugins load from installed entry points as users get them.

The servers every store's tests need (moto S3, Azurite, the two GCS emulators) start once per
test run, on first use, on free ports of 127.0.0.1; each test directory creates its own
bucket or container in them.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import generative  # noqa: F401  (registers and loads the hypothesis profile: ci or long)

S3_BUCKET = "outcommit-test"


@pytest.fixture(scope="session")
def moto_server() -> Iterator[Any]:
    """The moto S3 server over HTTP (``outcommit_s3.embedded.EmbeddedS3``)."""
    embedded = pytest.importorskip("outcommit_s3.embedded")
    server = embedded.start_moto_server(max_attempts=1)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def s3_server(moto_server: Any) -> Any:
    """The moto server with the S3 tests' bucket."""
    moto_server.create_bucket(S3_BUCKET)
    return moto_server


@pytest.fixture
def s3_config(s3_server: Any, tmp_path: Path) -> dict[str, Any]:
    """Reach the moto server; no real backoff (retries are counted, never waited for).

    ``OUTCOMMIT_TEST_S3_LIGHT_REQUESTS=false`` runs the S3 tests with the light
    CompleteMultipartUpload path off (``outcommit.s3.light-requests``, on by default):
    every completion through botocore's client."""
    light = {"outcommit.s3.light-requests": "false"} if os.environ.get("OUTCOMMIT_TEST_S3_LIGHT_REQUESTS") \
        == "false" else {}
    return {**s3_server.config, "outcommit.committer.threads": "4", "outcommit.retry.backoff-ms": "0",
            "outcommit.s3.staging.tmp-dir": str(tmp_path / "staging"), **light}


@pytest.fixture
def s3_root() -> str:
    """A fresh prefix per test."""
    return f"s3://{S3_BUCKET}/{uuid.uuid4().hex}"


@pytest.fixture(scope="session")
def azurite_server() -> Iterator[Any]:
    """Azurite, installed from npm on first use (``outcommit_azure.emulator.Azurite``)."""
    emulator = pytest.importorskip("outcommit_azure.emulator")
    server = emulator.start_azurite()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def gcs_server() -> Iterator[Any]:
    """The GCS emulator (``outcommit_gcs.emulator.GcsEmulator``)."""
    emulator = pytest.importorskip("outcommit_gcs.emulator")
    server = emulator.start_gcs_emulator()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def fake_gcs_server() -> Iterator[Any]:
    """fake-gcs-server, the GCS emulator that enforces upload preconditions (a subprocess)."""
    emulator = pytest.importorskip("outcommit_gcs.emulator")
    server = emulator.start_fake_gcs_server()
    yield server
    server.stop()


READING_DOC = Path(__file__).resolve().parents[1] / "docs" / "reading.md"


@pytest.fixture(scope="session")
def reading_table() -> dict[str, str]:
    """docs/reading.md's table of readers: reader call -> rows read (a number or ``error``)."""
    text = READING_DOC.read_text()
    body = text.split("<!-- reading-table -->")[1].split("<!-- /reading-table -->")[0]
    rows = [line.strip().strip("|").split("|") for line in body.strip().splitlines()[2:]]
    return {call.strip().strip("`"): rows_read.strip() for call, rows_read, _ in rows}


@pytest.fixture
def running_v1_destination(tmp_path: Path) -> str:
    """docs/reading.md's scenario: 3,000 committed rows (12 files), and a ``v1`` append job
    running on them with one task committed and one attempt writing, 500 rows each."""
    import pyarrow as pa

    import outcommit
    from outcommit.context import JobContext, TaskAttemptContext
    from outcommit.engine.local import LocalDriver
    from outcommit.engine.writer import write_table

    url = f"file://{tmp_path}/read ü events"

    def table(i: int) -> Any:
        return pa.table({"id": list(range(i * 500, i * 500 + 500)),
                         "date": ["2026-11-01"] * 250 + ["2026-11-02"] * 250})

    done = LocalDriver(url, committer="v1", partition_by=["date"], workers=2).run(
        [table(i) for i in range(6)])
    assert (done.files, done.rows) == (12, 3000)
    config = {"outcommit.committer.conflict-mode": "append"}
    committer = outcommit.create_committer(url, config, committer="v1")
    job = JobContext(url, config=config)
    committer.setup_job(job)
    for index in range(2):
        task = TaskAttemptContext(job, index, 0)
        committer.setup_task(task)
        write_table(committer.filesystem(task), committer.work_path(task), table(100 + index),
                    task_index=index, job_id=job.job_id, attempt=0, partition_by=["date"])
        if index == 0:
            committer.commit_task(task)
    return url
