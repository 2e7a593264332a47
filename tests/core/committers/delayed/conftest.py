"""Fixtures for the delayed-completion family on the ``memmp://`` store (no server)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

#: Parts of 16 bytes: a file of a few dozen bytes is a multipart upload of several parts.
SMALL_PARTS = {"outcommit.memmp.part-size": "16", "outcommit.memmp.min-part-size": "16"}


@pytest.fixture
def memmp_root() -> Iterator[str]:
    """A new directory of the memmp store; its files and pending uploads removed after."""
    from fsspec.implementations.memory import MemoryFileSystem

    from outcommit.stores.memmp import _LOCK, _PENDING

    root = f"/memmp-{uuid.uuid4().hex}"
    yield f"memmp://{root}"
    with _LOCK:
        for upload_id in [i for i, u in _PENDING.items() if u.path.startswith(root + "/")]:
            del _PENDING[upload_id]
    fs = MemoryFileSystem()
    if fs.exists(root):
        fs.rm(root, recursive=True)


@pytest.fixture
def small_parts() -> dict[str, Any]:
    return dict(SMALL_PARTS)
