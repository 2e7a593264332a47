"""Each test of the suites in a directory of its own, made by the suite and removed after.

A binding gives one root URL (``store_root``, ``destination_root``). Bindings that made a
fresh directory per test (``tmp_path``) passed; one that gave a fixed root, as a plugin
author does with a real bucket, saw half the suite fail on what earlier tests left there.
The suites now work below the root, in a unique directory per test, and remove it with
whatever is pending under it: a run against a real store leaves nothing behind.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

from ..factory import open_store
from ..store import Store

log = logging.getLogger(__name__)


def unique_child(root: str, test_name: str) -> str:
    """A new directory's URL below ``root``: the test's name (readable in a listing), then a
    random part (two runs of one test never meet)."""
    readable = re.sub(r"[^A-Za-z0-9_.-]+", "-", test_name).strip("-.")[:48] or "test"
    return f"{root.rstrip('/')}/{readable}-{uuid.uuid4().hex[:12]}"


def remove_tree(store: Store, path: str) -> None:
    """Delete ``path`` and abort the pending uploads under it. Never raises: it runs after
    the test, whose own outcome must stand; what it could not remove is logged."""
    try:
        multipart = store.multipart()
        if multipart is not None:
            for upload in multipart.list_pending(path.rstrip("/") + "/"):
                multipart.abort(upload.path, upload.upload_id)
        if store.exists(path):
            store.delete(path, recursive=True)
    except Exception:
        log.warning("could not remove the test directory %s", store.url(path), exc_info=True)


def own_directory(root: str, test_name: str, config: Mapping[str, Any]) -> Iterator[str]:
    """A fixture's body: the URL of this test's own directory below ``root``; removed after."""
    url = unique_child(root, test_name)
    yield url
    store = open_store(url, config)
    try:
        remove_tree(store, store.strip(url))
    finally:
        store.close()
