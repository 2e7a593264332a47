"""Fixtures for the manifest committer tests on the built-in stores."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest


@pytest.fixture
def file_root(tmp_path) -> str:
    return f"file://{tmp_path}/root"


@pytest.fixture
def memory_root() -> Iterator[str]:
    from fsspec.implementations.memory import MemoryFileSystem

    root = f"/manifest-{uuid.uuid4().hex}"
    yield f"memory://{root}"
    fs = MemoryFileSystem()
    if fs.exists(root):
        fs.rm(root, recursive=True)
