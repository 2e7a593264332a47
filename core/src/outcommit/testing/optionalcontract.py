"""The store contract's part on optional operations (:mod:`outcommit.storeoptional`): each
accessor answers exactly when its capability is declared, and each declared interface
keeps its promises. A base of :class:`~outcommit.testing.stores.StoreContract`, which
bindings subclass; its tests are skipped, saying so, where the capability is not declared."""

from __future__ import annotations

from ..extras import require

require("pytest", "testing", "outcommit.testing.optionalcontract (the store contract)")

import pytest  # noqa: E402  (after the check: a missing pytest names the extra that brings it)

from .. import capabilities as caps  # noqa: E402
from ..store import Store  # noqa: E402
from ..storeoptional import OPTIONAL_OPERATIONS  # noqa: E402


def need(store: Store, capability: str) -> None:
    """Skip the calling test, saying so, unless ``store`` declares ``capability``."""
    if not store.has_capability(capability):
        pytest.skip(f"{type(store).__name__} does not declare {capability}")


class OptionalOperationsContract:
    """Abstract: run through :class:`~outcommit.testing.stores.StoreContract` (its fixtures)."""

    # -- batch delete --------------------------------------------------------------------------
    def test_batch_delete_when_declared(self, store: Store, root: str) -> None:
        need(store, caps.DELETE_BATCH)
        batch = store.batch_delete()
        assert batch is not None
        paths = [store.join(root, "batch", f"{i}") for i in range(3)]
        for path in paths:
            store.write_bytes(path, b"x")
        batch.delete_many(paths)
        assert store.list_files(store.join(root, "batch")) == []

    # -- create exclusive -------------------------------------------------------------------------
    def test_create_exclusive_is_create_if_absent(self, store: Store, root: str) -> None:
        need(store, caps.CREATE_EXCLUSIVE)
        exclusive = store.exclusive_create()
        assert exclusive is not None
        path = store.join(root, "claim.json")
        exclusive.create_exclusive(path, b"first")
        with pytest.raises(FileExistsError):
            exclusive.create_exclusive(path, b"second")
        assert store.read_bytes(path) == b"first"

    # -- optional operations: one way -------------------------------------------------------------
    def test_each_optional_operation_is_offered_exactly_when_declared(self, store: Store) -> None:
        """Each accessor answers the implementing object (of its interface) exactly when the
        store declares the capability naming it, and None otherwise: a committer asking
        ``multipart()`` learns what the factory checked, never something else."""
        for op in OPTIONAL_OPERATIONS:
            found, declared = getattr(store, op.accessor)(), store.has_capability(op.capability)
            assert (found is not None) == declared, \
                f"{op.accessor}() answered {found!r}; {op.capability} declared: {declared}"
            assert found is None or isinstance(found, op.interface), f"{op.accessor}() answered {found!r}"

    # -- multipart uploads ------------------------------------------------------------------------------
    def test_multipart_uploads_when_declared(self, store: Store, root: str) -> None:
        need(store, caps.MULTIPART_DELAYED_COMPLETION)
        mp = store.multipart()
        assert mp is not None and mp.part_size >= 1
        path = store.join(root, "mp", "object.bin")
        upload = mp.initiate(path)
        etags = [mp.upload_part(path, upload, 1, b"first part")]
        assert [u.upload_id for u in mp.list_pending(store.join(root, "mp"))] == [upload]
        assert not store.exists(path)  # nothing visible before completion
        etag = mp.complete(path, upload, etags)
        assert mp.complete(path, upload, etags) == etag  # idempotent
        assert store.read_bytes(path) == b"first part"
        assert mp.list_pending(store.join(root, "mp")) == []
        other = mp.initiate(store.join(root, "mp10", "o"))
        assert mp.list_pending(store.join(root, "mp")) == []  # exact directory prefix
        assert mp.abort(store.join(root, "mp10", "o"), other) is True
        assert mp.abort(store.join(root, "mp10", "o"), other) is False

    def test_block_lists_when_declared(self, store: Store, root: str) -> None:
        need(store, caps.BLOCKLIST_DELAYED_COMPLETION)
        blocks = store.block_lists()
        assert blocks is not None and blocks.part_size >= 1 and not blocks.abortable
        path = store.join(root, "bl", "object.bin")
        upload = blocks.initiate(path)
        ids = [blocks.upload_part(path, upload, 1, b"first "), blocks.upload_part(path, upload, 2, b"second")]
        assert not store.exists(path)  # staged blocks are invisible
        assert [u.path for u in blocks.list_pending(store.join(root, "bl"))] == [path]
        assert not blocks.holds(path, upload, ids)
        with pytest.raises(ValueError):
            blocks.check_parts(upload, list(reversed(ids)))  # not this upload's part 1, 2
        blocks.complete(path, upload, ids, if_none_match=True)
        assert store.read_bytes(path) == b"first second" and blocks.holds(path, upload, ids)
        blocks.complete(path, upload, ids, if_none_match=True)  # repeated: success, proved ours
        assert blocks.list_pending(store.join(root, "bl")) == []
        other = blocks.initiate(path)
        staged = [blocks.upload_part(path, other, 1, b"other")]
        with pytest.raises(FileExistsError):  # an object is there that these blocks are not
            blocks.complete(path, other, staged, if_none_match=True)
        assert store.read_bytes(path) == b"first second"
        ten = store.join(root, "bl0", "x")
        blocks.upload_part(ten, blocks.initiate(ten), 1, b"x")
        assert blocks.list_pending(store.join(root, "bl")) == []  # exact directory prefix

    def test_object_metadata_when_declared(self, store: Store, root: str) -> None:
        need(store, caps.OBJECT_METADATA)
        writer = store.object_metadata()
        assert writer is not None
        path = store.join(root, "meta", "marker")
        writer.write_with_metadata(path, b"", {"x-test-length": "42"})
        info = store.info(path)
        assert info is not None and info.size == 0
