"""``memmp://``: S3's multipart semantics, which the delayed-completion family relies on."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from outcommit.errors import UploadGoneError
from outcommit.factory import open_store
from outcommit.stores.memmp import EntityTooSmall, InvalidPart, InvalidPartOrder, MemoryMultipartUploads


@pytest.fixture
def memmp_root() -> Iterator[str]:
    """A new directory of the memmp store; its files and pending uploads removed after."""
    root = f"/memmp-{uuid.uuid4().hex}"
    yield f"memmp://{root}"
    store = open_store(f"memmp://{root}")
    for upload in store.multipart().list_pending(root + "/"):  # type: ignore[union-attr]
        store.multipart().abort(upload.path, upload.upload_id)  # type: ignore[union-attr]
    store.delete(root, recursive=True)


@pytest.fixture
def small_parts() -> dict[str, Any]:
    return {"outcommit.memmp.part-size": "16", "outcommit.memmp.min-part-size": "16"}


@pytest.fixture
def store(memmp_root: str, small_parts: dict[str, Any]):  # type: ignore[no-untyped-def]
    return open_store(memmp_root, small_parts)


@pytest.fixture
def mp(store) -> MemoryMultipartUploads:  # type: ignore[no-untyped-def]
    uploads = store.multipart()
    assert isinstance(uploads, MemoryMultipartUploads)
    return uploads


@pytest.fixture
def root(store, memmp_root: str) -> str:  # type: ignore[no-untyped-def]
    return str(store.strip(memmp_root))


def _upload(mp: MemoryMultipartUploads, path: str, *parts: bytes) -> tuple[str, list[str]]:
    upload_id = mp.initiate(path)
    return upload_id, [mp.upload_part(path, upload_id, n, p) for n, p in enumerate(parts, 1)]


def test_nothing_visible_until_complete(store, mp, root: str) -> None:  # type: ignore[no-untyped-def]
    path = root + "/a/f"
    upload_id, etags = _upload(mp, path, b"x" * 16, b"tail")
    assert not store.exists(path)
    assert [p.upload_id for p in mp.list_pending(path.rsplit("/", 1)[0] + "/")] == [upload_id]
    etag = mp.complete(path, upload_id, etags)
    assert store.read_bytes(path) == b"x" * 16 + b"tail"
    assert etag.endswith("-2") and mp.holds(path, upload_id, etags)
    assert mp.list_pending(path.rsplit("/", 1)[0] + "/") == []


def test_listing_is_by_directory_with_initiated_time(store, mp, root: str) -> None:  # type: ignore[no-untyped-def]
    root = root
    mine = mp.initiate(root + "/out/dataset1/f")
    mp.initiate(root + "/out/dataset10/f")
    listed = mp.list_pending(root + "/out/dataset1")
    assert [p.upload_id for p in listed] == [mine] and listed[0].initiated is not None


def test_complete_twice_is_success_while_the_object_is_its_own(store, mp, root: str) -> None:  # type: ignore[no-untyped-def]
    path = root + "/f"
    upload_id, etags = _upload(mp, path, b"data")
    first = mp.complete(path, upload_id, etags)
    assert mp.complete(path, upload_id, etags) == first
    store.write_bytes(path, b"replaced")  # another writer's object: the upload's is gone
    with pytest.raises(UploadGoneError, match="NoSuchUpload"):
        mp.complete(path, upload_id, etags)


def test_unknown_and_aborted_uploads_fail_with_no_such_upload(store, mp, root: str) -> None:  # type: ignore[no-untyped-def]
    path = root + "/f"
    upload_id, etags = _upload(mp, path, b"data")
    assert mp.abort(path, upload_id) and not mp.abort(path, upload_id)
    with pytest.raises(UploadGoneError, match="NoSuchUpload"):
        mp.complete(path, upload_id, etags)
    with pytest.raises(UploadGoneError, match="NoSuchUpload"):
        mp.complete(path, "no-such-id", etags)
    with pytest.raises(UploadGoneError):
        mp.upload_part(path, upload_id, 1, b"late")
    assert not store.exists(path)


def test_part_list_must_match_the_uploaded_parts(store, mp, root: str) -> None:  # type: ignore[no-untyped-def]
    path = root + "/f"
    upload_id, etags = _upload(mp, path, b"a" * 16, b"b" * 16, b"c")
    with pytest.raises(InvalidPart):
        mp.complete(path, upload_id, [etags[0], etags[0], etags[2]])
    with pytest.raises(InvalidPart):
        mp.complete(path, upload_id, [*etags, etags[0]])  # part 4 never uploaded
    with pytest.raises(InvalidPartOrder):
        mp.complete_parts(path, upload_id, [(2, etags[1]), (1, etags[0])])
    assert not store.exists(path)  # refused completions show nothing, and leave it pending
    assert mp.complete(path, upload_id, etags).endswith("-3")


def test_every_part_but_the_last_has_the_minimum_size(store, mp, root: str) -> None:  # type: ignore[no-untyped-def]
    path = root + "/f"
    upload_id, etags = _upload(mp, path, b"short", b"b" * 16)
    with pytest.raises(EntityTooSmall):
        mp.complete(path, upload_id, etags)
    assert mp.complete_parts(path, upload_id, [(2, etags[1])]).endswith("-1")  # a last part may be short


def test_part_numbers_are_1_to_10000(store, mp, root: str) -> None:  # type: ignore[no-untyped-def]
    path = root + "/f"
    upload_id = mp.initiate(path)
    for number in (0, 10_001):
        with pytest.raises(ValueError, match=r"outside 1\.\.10000"):
            mp.upload_part(path, upload_id, number, b"x")
    mp.upload_part(path, upload_id, 10_000, b"x")


def test_exclusive_create_refuses_an_existing_object(store, mp, root: str) -> None:  # type: ignore[no-untyped-def]
    path = root + "/f"
    store.write_bytes(path, b"old")
    upload_id, etags = _upload(mp, path, b"new")
    with pytest.raises(FileExistsError, match="If-None-Match"):
        mp.complete(path, upload_id, etags, if_none_match=True)
    assert store.read_bytes(path) == b"old"
    mp.complete(path, upload_id, etags)
    assert store.read_bytes(path) == b"new"


def test_default_minimum_part_size_is_s3s(memmp_root: str) -> None:
    uploads = open_store(memmp_root).multipart()
    assert isinstance(uploads, MemoryMultipartUploads) and uploads.min_part_size == 5 * 1024**2


@pytest.mark.parametrize("then", ["delete", "replace"])
def test_a_completed_files_bytes_go_with_it(store, mp, root: str, then: str) -> None:  # type: ignore[no-untyped-def]
    """The record of a completed upload (for a retried completion's answer) does not keep
    the file's bytes in memory once the file is deleted or replaced, nor stays itself."""
    import gc
    import weakref

    from outcommit.stores import memmp

    path = root + "/gone/f"
    upload_id, etags = _upload(mp, path, b"x" * 16, b"tail")
    mp.complete(path, upload_id, etags)
    made = weakref.ref(store._mem.store[path])
    if then == "delete":
        store.delete(path)
    else:
        store.write_bytes(path, b"other")
    gc.collect()
    assert made() is None, "the deleted file's bytes are still held"
    assert upload_id not in memmp._COMPLETED
    assert not mp.holds(path, upload_id, etags)
    with pytest.raises(UploadGoneError):
        mp.complete(path, upload_id, etags)
