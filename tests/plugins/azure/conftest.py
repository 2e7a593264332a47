"""Azurite (installed from npm on first use), started once per test session on a free port."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from outcommit_azure.emulator import Azurite

CONTAINER = "outcommit-tests"


@pytest.fixture(scope="session")
def azurite(azurite_server: Azurite) -> Azurite:
    azurite_server.create_container(CONTAINER)
    return azurite_server


@pytest.fixture
def azure_config(azurite: Azurite) -> dict[str, Any]:
    return {**azurite.config(), "outcommit.manifest.retry-backoff-ms": "0"}


@pytest.fixture
def azure_root(azurite: Azurite) -> str:
    return f"abfs://{CONTAINER}/{uuid.uuid4().hex}"
