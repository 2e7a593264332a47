"""Shared test configuration: plugins load from installed entry points as users get them.

The servers every store's tests need (moto S3, Azurite, the GCS emulator) start once per
test run, on first use, on free ports of 127.0.0.1; each test directory creates its own
bucket or container in them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def moto_server() -> Iterator[Any]:
    """The moto S3 server over HTTP (``outcommit_s3.embedded.EmbeddedS3``)."""
    embedded = pytest.importorskip("outcommit_s3.embedded")
    server = embedded.start_moto_server(max_attempts=1)
    yield server
    server.stop()


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
