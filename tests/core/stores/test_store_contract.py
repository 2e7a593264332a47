"""The store contract on the built-in stores, and on the base Store alone."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import fsspec
import pytest

from generative import budget
from outcommit.config import Config
from outcommit.store import Store
from outcommit.testing.stores import StoreContract


class TestFileStore(StoreContract):
    name_settings = budget(25)

    @pytest.fixture
    def store_root(self, tmp_path: Path) -> str:
        return f"file://{tmp_path}/root"


class TestMemoryStore(StoreContract):
    name_settings = budget(25)

    @pytest.fixture
    def store_root(self) -> str:
        return f"memory:///contract-{uuid.uuid4().hex}"


class TestMemmpStore(StoreContract):
    """The memory store with S3's multipart uploads and no rename declared."""

    name_settings = budget(25)

    @pytest.fixture
    def store_root(self) -> str:
        return f"memmp:///contract-{uuid.uuid4().hex}"


class TestBaseStoreOverFsspecMemory(StoreContract):
    """What a plugin's store inherits, overriding nothing, over a generic fsspec filesystem
    (fsspec's own memory filesystem): its deletes and renames name exactly one path too."""

    name_settings = budget(25)

    @pytest.fixture
    def store_root(self) -> str:
        return f"memory:///base-{uuid.uuid4().hex}"

    @pytest.fixture
    def store(self, store_root: str, config: dict[str, Any]) -> Store:
        return Store(store_root, Config(config), fs=fsspec.filesystem("memory"))

    def test_delete_empty_dir_never_removes_contents(self, store: Store, root: str) -> None:
        pytest.skip("the base Store removes no directory (as on object stores): a store with "
                    "directories overrides delete and delete_empty_dir")
