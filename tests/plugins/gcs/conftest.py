"""The GCS emulators, each started once per test session on a free local port."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from outcommit_gcs.emulator import GcsEmulator

BUCKET = "outcommit-tests"


@pytest.fixture(scope="session")
def gcs_emulator(gcs_server: GcsEmulator) -> GcsEmulator:
    gcs_server.create_bucket(BUCKET)
    return gcs_server


@pytest.fixture
def gcs_config(gcs_emulator: GcsEmulator) -> dict[str, Any]:
    return {**gcs_emulator.config(), "outcommit.manifest.retry-backoff-ms": "0"}


@pytest.fixture
def gcs_root(gcs_emulator: GcsEmulator) -> str:
    return f"gs://{BUCKET}/{uuid.uuid4().hex}"


@pytest.fixture(scope="session")
def fake_gcs(fake_gcs_server: GcsEmulator) -> GcsEmulator:
    fake_gcs_server.create_bucket(BUCKET)
    return fake_gcs_server


@pytest.fixture
def fake_gcs_config(fake_gcs: GcsEmulator) -> dict[str, Any]:
    return {**fake_gcs.config(), "outcommit.manifest.retry-backoff-ms": "0"}


@pytest.fixture
def fake_gcs_root(fake_gcs: GcsEmulator) -> str:
    return f"gs://{BUCKET}/{uuid.uuid4().hex}"
