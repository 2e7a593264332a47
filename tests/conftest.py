"""Shared test configuration: plugins load from installed entry points as users get them.

The servers every store's tests need (moto S3, Azurite, the GCS emulator) start once per
test run, on first use, on free ports of 127.0.0.1; each test directory creates its own
bucket or container in them.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

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
    """Reach the moto server; no real backoff (retries are counted, never waited for)."""
    return {**s3_server.config, "outcommit.committer.threads": "4", "outcommit.retry.backoff-ms": "0",
            "outcommit.s3.staging.tmp-dir": str(tmp_path / "staging")}


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
