"""The generic ``Store`` operations that plugins inherit (``outcommit/store.py``)."""

from __future__ import annotations

import threading

import pytest

import outcommit
from outcommit.errors import InjectedFault
from outcommit.stores.memory import MemoryStore
from outcommit.testing.faults import Fault, FaultInjectingStore


def test_without_batches_files_are_deleted_parallelism_at_once():
    """A store with no batch delete removes a 'replace''s files one request each, but not
    one after another: ``parallelism`` deletes are in flight together."""
    store = FaultInjectingStore(outcommit.open_store("memory://parallel-delete/x"))
    assert store.batch_delete() is None and store.parallelism > 1
    paths = [f"/parallel-delete/x/part-{i}" for i in range(2 * store.parallelism)]
    for path in paths:
        store.write_bytes(path, b"x")
    # Each delete waits until `parallelism` of them have arrived: one at a time, the first
    # would wait alone and the barrier would break.
    together = threading.Barrier(store.parallelism, timeout=60)
    store.add(Fault("delete", times=0, predicate=lambda _op, _args: together.wait() < 0))
    store.delete_files(paths)
    assert store.calls["delete"] == len(paths)
    assert store.list_files("/parallel-delete/x") == []


def test_a_failed_delete_fails_the_call():
    store = FaultInjectingStore(outcommit.open_store("memory://failed-delete/x"))
    paths = [f"/failed-delete/x/{i}" for i in range(3)]
    for path in paths:
        store.write_bytes(path, b"x")
    store.add(Fault("delete", path_contains="/x/1", error=PermissionError))
    with pytest.raises(PermissionError):
        store.delete_files(paths)
    assert store.exists(paths[1])


def test_threads_first_using_a_store_together_all_use_one_filesystem() -> None:
    """A shared store's first users may be several task threads at once: whichever makes
    a filesystem, they all use the one kept (one client, one connection pool)."""
    both_making = threading.Barrier(2, timeout=60)

    class Racing(MemoryStore):
        def make_filesystem(self):  # type: ignore[no-untyped-def]
            both_making.wait()  # both threads are past the check: each makes its own
            return type(super().make_filesystem())(skip_instance_cache=True)

    store = Racing("memory://shared/fs")
    seen: list[object] = []
    threads = [threading.Thread(target=lambda: seen.append(store.fs)) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(seen) == 2 and seen[0] is seen[1] is store.fs


def test_fs_path_strips_the_protocol_as_the_filesystem_does() -> None:
    """Store.strip's one use of fsspec's implementer hook ``_strip_protocol`` (no public
    equivalent on an instance): a URL, and a path without a protocol, of the store's fs."""
    import fsspec

    from outcommit.store import fs_path

    memory = fsspec.filesystem("memory")
    assert fs_path(memory, "memory://bucket/a/b") == "/bucket/a/b"
    assert fs_path(memory, "/bucket/a/b") == "/bucket/a/b"
    local = fsspec.filesystem("file")
    assert fs_path(local, "file:///tmp/x/y") == "/tmp/x/y"
    assert fs_path(local, "/tmp/x/y") == "/tmp/x/y"


def test_an_override_under_an_old_private_name_is_refused_with_the_new_name() -> None:
    """Store extension points are public methods: a plugin still overriding the private
    name would never be called, so its class is refused, naming the method to override."""
    from outcommit.store import Store

    with pytest.raises(TypeError, match=r"Store\.make_filesystem now; rename the override"):
        class Old(Store):
            def _make_filesystem(self) -> object:
                return object()


def test_an_override_of_an_optional_operations_accessor_is_refused_naming_implementation() -> None:
    """The accessors answer from the declared capability alone: a store overriding one could
    offer uploads it does not declare (or hide ones it does), so its class is refused,
    naming the one extension point that supplies the implementation."""
    from outcommit.multipart import MultipartUploads
    from outcommit.store import Store

    with pytest.raises(TypeError, match=r"\.multipart: Store answers it from the declared capability "
                                        r"fs\.multipart\.delayed-completion; override Store\.implementation"):
        class Own(Store):
            def multipart(self) -> MultipartUploads | None:
                return None


def test_a_declared_capability_without_its_interface_fails_at_the_accessor() -> None:
    """A store declaring ``fs.delete.batch`` with no ``delete_many``: the accessor says so,
    naming the interface and the extension point, before any caller uses it."""
    from outcommit import capabilities as caps

    class Claims(MemoryStore):
        capabilities = MemoryStore.capabilities.with_(caps.DELETE_BATCH)

    with pytest.raises(TypeError, match=r"declares fs\.delete\.batch but offers Claims, not a BatchDelete"):
        Claims("memory://claims/x").batch_delete()


def test_an_operation_implemented_but_not_declared_is_not_offered() -> None:
    """Offered means declared: a store with ``create_exclusive`` that does not declare
    ``fs.create.exclusive`` (a server ignoring preconditions) offers no exclusive create."""
    from outcommit import capabilities as caps
    from outcommit.capabilities import Capabilities

    class Undeclared(MemoryStore):
        capabilities = Capabilities(MemoryStore.capabilities.names - {caps.CREATE_EXCLUSIVE})

    store = Undeclared("memory://undeclared/x")
    assert store.exclusive_create() is None
    assert FaultInjectingStore(store).exclusive_create() is None  # a wrapper declares what it wraps
    assert FaultInjectingStore(MemoryStore("memory://declared/x")).exclusive_create() is not None


def test_the_fault_wrapper_reaches_an_optional_operation_through_the_inner_accessor() -> None:
    """A store may implement an optional interface on a separate object
    (``Store.implementation``): the fault wrapper calls that object, as every caller does,
    not a method of the store's own class that its declaration does not name."""
    from outcommit import capabilities as caps

    class Creator:
        def __init__(self, store: MemoryStore) -> None:
            self.store, self.calls = store, 0

        def create_exclusive(self, path: str, data: bytes) -> None:
            self.calls += 1
            MemoryStore.create_exclusive(self.store, path, data)

    class Separate(MemoryStore):
        def __init__(self, url: str) -> None:
            super().__init__(url)
            self.creator = Creator(self)

        def implementation(self, capability: str) -> object:
            return self.creator if capability == caps.CREATE_EXCLUSIVE else self

        def create_exclusive(self, path: str, data: bytes) -> None:
            raise AssertionError("not the declared implementation")

    inner = Separate("memory://separate/x")
    wrapped = FaultInjectingStore(inner, [Fault("create_exclusive", path_contains="second")])
    creator = wrapped.exclusive_create()
    assert creator is not None
    creator.create_exclusive("/separate/x/first", b"1")
    assert inner.creator.calls == 1
    with pytest.raises(InjectedFault):
        creator.create_exclusive("/separate/x/second", b"2")


def test_a_delayed_committer_on_a_state_store_without_exclusive_create_says_which() -> None:
    """The delayed committers' claims, pendingsets and commit record need exclusive create;
    a store holding them that lacks it (a staging committer's shared store, which the
    factory did not check) is refused with the capability named, not an AttributeError."""
    from outcommit import capabilities as caps
    from outcommit.capabilities import Capabilities
    from outcommit.committers.delayed import claims
    from outcommit.errors import CommitError

    class Undeclared(MemoryStore):
        capabilities = Capabilities(MemoryStore.capabilities.names - {caps.CREATE_EXCLUSIVE})

    with pytest.raises(CommitError, match=r"needs fs\.create\.exclusive, which <Undeclared memory://u/x> "
                                          r"does not declare; use a store that declares it"):
        claims.exclusive(Undeclared("memory://u/x"))
