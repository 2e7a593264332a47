"""The store contract on the built-in stores."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from outcommit.testing.stores import StoreContract


class TestFileStore(StoreContract):
    @pytest.fixture
    def store_root(self, tmp_path: Path) -> str:
        return f"file://{tmp_path}/root"


class TestMemoryStore(StoreContract):
    @pytest.fixture
    def store_root(self) -> str:
        return f"memory:///contract-{uuid.uuid4().hex}"
