"""Azurite (installed from npm on first use), started once per test session on a free port."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from outcommit_azure.emulator import Azurite, start_azurite

CONTAINER = "outcommit-tests"


@pytest.fixture(scope="session")
def azurite() -> Iterator[Azurite]:
    server = start_azurite()
    try:
        server.create_container(CONTAINER)
        yield server
    finally:
        server.stop()


@pytest.fixture
def azure_config(azurite: Azurite) -> dict[str, Any]:
    return {**azurite.config(), "outcommit.manifest.retry-backoff-ms": "0"}


@pytest.fixture
def azure_root(azurite: Azurite) -> str:
    return f"abfs://{CONTAINER}/{uuid.uuid4().hex}"
