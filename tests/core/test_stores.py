"""The built-in stores keep the promises committers rely on."""

from __future__ import annotations

import uuid

import pytest

import outcommit
from outcommit.store import Store


@pytest.fixture(params=["file", "memory"])
def store_and_root(request, tmp_path) -> tuple[Store, str]:
    url = f"file://{tmp_path}/s" if request.param == "file" else f"memory:///stores-{uuid.uuid4().hex}"
    store = outcommit.open_store(url)
    root = store.strip(url)
    store.mkdirs(root)
    return store, root


def test_delete_empty_dir_never_removes_contents(store_and_root) -> None:
    store, root = store_and_root
    shared = store.join(root, "_temporary")
    store.write_bytes(store.join(shared, "other-job", "0", "_job.json"), b"{}")
    store.delete_empty_dir(shared)  # another job is using it: must survive
    assert store.read_bytes(store.join(shared, "other-job", "0", "_job.json")) == b"{}"
    store.delete(store.join(shared, "other-job"), recursive=True)
    store.delete_empty_dir(shared)
    assert not store.exists(shared)
    store.delete_empty_dir(shared)  # missing: not an error


def test_rename_file_refuses_to_overwrite_unless_asked(store_and_root) -> None:
    store, root = store_and_root
    a, b = store.join(root, "a"), store.join(root, "sub", "b")
    store.write_bytes(a, b"A")
    store.write_bytes(b, b"B")
    with pytest.raises(FileExistsError):
        store.rename_file(a, b)
    assert store.read_bytes(b) == b"B" and store.read_bytes(a) == b"A"
    store.rename_file(a, b, overwrite=True)
    assert store.read_bytes(b) == b"A" and not store.exists(a)


def test_rename_dir_never_nests_into_an_existing_directory(store_and_root) -> None:
    store, root = store_and_root
    src, dst = store.join(root, "src"), store.join(root, "dst")
    store.write_bytes(store.join(src, "x", "f"), b"1")
    store.write_bytes(store.join(dst, "g"), b"2")
    with pytest.raises(FileExistsError):
        store.rename_dir(src, dst)
    assert not store.exists(store.join(dst, "src"))
    store.rename_dir(src, store.join(root, "moved"))
    assert store.read_bytes(store.join(root, "moved", "x", "f")) == b"1" and not store.exists(src)


def test_create_exclusive_is_create_if_absent(store_and_root) -> None:
    store, root = store_and_root
    path = store.join(root, "claim.json")
    store.create_exclusive(path, b"first")
    with pytest.raises(FileExistsError):
        store.create_exclusive(path, b"second")
    assert store.read_bytes(path) == b"first"


def test_write_atomic_leaves_no_temporary_files(store_and_root) -> None:
    store, root = store_and_root
    path = store.join(root, "_SUCCESS")
    store.write_atomic(path, b"one")
    store.write_atomic(path, b"two")
    assert store.read_bytes(path) == b"two"
    assert [i.name for i in store.list_files(root)] == ["_SUCCESS"]
