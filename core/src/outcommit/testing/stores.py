"""The store contract: what every committer relies on a store for, as tests.

Subclass :class:`StoreContract` in a test module with the fixtures of your store, as
fsspec backends subclass fsspec's abstract tests; pytest collects the subclass::

    class TestMyStore(StoreContract):
        @pytest.fixture
        def store_root(self):
            return "mystore://bucket/contract"   # each test works in a new directory below it

        @pytest.fixture
        def config(self):
            return {"outcommit.mystore.root": "/srv/data"}

Tests of optional behaviour run when the store declares the capability that stands for
it (exclusive create, directory rename, batch deletes, multipart uploads, etag-preserving
rename) and are skipped, saying so, when it does not. A store that passes this suite
and :class:`~outcommit.testing.conformance.CommitterConformance` for the committers
that are safe on it keeps every promise the committers rely on.

One test is a property (hypothesis): every operation acts on exactly the path it is
given, whatever characters the names hold, and on no decoy beside it that a glob, an
unquoting or a Unicode normalisation of the name would reach
(:mod:`outcommit.testing.names`). It carries the ``generative`` mark; a binding sets its
budget with ``name_settings`` (default: 20 examples).
"""

from __future__ import annotations

import unicodedata
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

from ..extras import require

require("pytest", "testing", "outcommit.testing.stores (the store contract)")
require("hypothesis", "testing", "outcommit.testing.stores (the store contract)")

import pytest  # noqa: E402  (after the checks: a missing pytest names the extra that brings it)
from hypothesis import assume, example, given, settings  # noqa: E402

from .. import capabilities as caps  # noqa: E402
from ..errors import CorruptFileError  # noqa: E402
from ..factory import open_store  # noqa: E402
from ..store import FileInfo, Store  # noqa: E402
from .names import KINDS, check_exact_names, kinds, relative_paths  # noqa: E402
from .optionalcontract import OptionalOperationsContract, need  # noqa: E402
from .roots import own_directory  # noqa: E402


class StoreContract(OptionalOperationsContract):
    """Abstract suite: not collected itself (no ``Test`` prefix), run by subclasses."""

    #: The budget of the names property (the project's bindings: ``generative.budget``).
    name_settings: settings = settings(max_examples=20, deadline=None)
    #: Characters the server under test rewrites or cannot serve in names where the real
    #: service keeps them (an emulator's defect, not the store's): the names property leaves
    #: them out.
    server_mishandles: str = ""

    # -- fixtures a binding provides ------------------------------------------------------
    @pytest.fixture
    def store_root(self) -> str:
        raise NotImplementedError("the binding must provide store_root: the URL of a directory of "
                                  "the store (each test works in a new directory below it)")

    @pytest.fixture
    def config(self) -> dict[str, Any]:
        return {}

    # -- helpers ----------------------------------------------------------------------------
    @pytest.fixture
    def root_url(self, store_root: str, config: dict[str, Any],
                 request: pytest.FixtureRequest) -> Iterator[str]:
        """This test's own directory below ``store_root``, made for it and removed after
        (``outcommit.testing.roots``): a binding may give a fixed root, such as a real bucket's."""
        yield from own_directory(store_root, request.node.name, config)

    @pytest.fixture
    def store(self, root_url: str, config: dict[str, Any]) -> Store:
        return open_store(root_url, config)

    @pytest.fixture
    def root(self, store: Store, root_url: str) -> str:
        path = store.strip(root_url)
        store.mkdirs(path)
        return path

    need = staticmethod(need)

    # -- identity ---------------------------------------------------------------------------
    def test_urls_and_paths_round_trip(self, store: Store, root_url: str, root: str) -> None:
        path = store.join(root, "dir", "file name ü.txt")
        assert store.strip(store.url(path)) == path
        assert store.url(root).split("://", 1)[0] == root_url.split("://", 1)[0]
        assert store.strip(root_url + "/") == root

    def test_capabilities_are_declared_as_data(self, store: Store) -> None:
        declared = set(store.capabilities.names)
        assert all(store.has_capability(name) for name in declared)
        assert not store.has_capability("no.such.capability")

    # -- reading and writing -----------------------------------------------------------------
    def test_write_then_read_and_info(self, store: Store, root: str) -> None:
        path = store.join(root, "sub", "a.bin")
        store.write_bytes(path, b"hello")
        assert store.read_bytes(path) == b"hello"
        info = store.info(path)
        assert info is not None and not info.is_dir and info.size == 5 and info.name == "a.bin"
        assert store.exists(path) and not store.is_dir(path)
        assert store.is_dir(store.join(root, "sub"))
        if store.has_capability(caps.ETAGS_AVAILABLE):
            assert info.etag

    def test_modified_is_the_stores_own_time_of_a_file(self, store: Store, root: str) -> None:
        """What a sweep of scope before-job dates a job's start by (its marker's time)."""
        path = store.join(root, "dated", "a.bin")
        store.write_bytes(path, b"x")
        when = store.modified(path)
        assert when is None or when.tzinfo is not None, when
        assert store.modified(store.join(root, "dated", "missing.bin")) is None

    def test_missing_paths(self, store: Store, root: str) -> None:
        missing = store.join(root, "nothing", "here")
        assert store.info(missing) is None and not store.exists(missing)
        assert store.list_dir(missing) == [] and store.list_files(missing) == []
        with pytest.raises(FileNotFoundError):
            store.read_bytes(missing)
        store.delete(missing)  # not an error
        store.delete(missing, recursive=True)

    def test_open_writes_and_reads_through_fsspec(self, store: Store, root: str) -> None:
        path = store.join(root, "opened", "f.txt")
        with store.open(path, "wb") as f:
            f.write(b"through open")
        with store.open(path, "rb") as f:
            assert f.read() == b"through open"

    def test_write_atomic_replaces_whole_and_leaves_nothing_else(self, store: Store, root: str) -> None:
        path = store.join(root, "_SUCCESS")
        store.write_atomic(path, b"one")
        store.write_atomic(path, b"two two")
        assert store.read_bytes(path) == b"two two"
        assert [i.name for i in store.list_files(root)] == ["_SUCCESS"]

    def test_json_round_trip_and_corruption(self, store: Store, root: str) -> None:
        path = store.join(root, "data.json")
        store.save_json(path, {"a": [1, 2], "b": "ü"})
        assert store.load_json(path) == {"a": [1, 2], "b": "ü"}
        store.write_bytes(path, b"{not json")
        with pytest.raises(CorruptFileError) as failure:
            store.load_json(path)
        assert failure.value.path == store.url(path)

    # -- listing ---------------------------------------------------------------------------------
    def test_list_dir_is_direct_children_sorted(self, store: Store, root: str) -> None:
        for rel in ("b.txt", "a/x.txt", "a/deeper/y.txt", "c/z.txt"):
            store.write_bytes(store.join(root, rel), rel.encode())
        children = store.list_dir(root)
        assert [(c.name, c.is_dir) for c in children] == [("a", True), ("b.txt", False), ("c", True)]
        assert [c.path for c in children] == sorted(c.path for c in children)
        assert all(isinstance(c, FileInfo) for c in children)

    def test_list_files_is_recursive_files_only(self, store: Store, root: str) -> None:
        for rel in ("a/x.txt", "a/deeper/y.txt", "top.txt"):
            store.write_bytes(store.join(root, rel), b"12")
        found = store.list_files(root)
        assert [f.path for f in found] == sorted(store.join(root, r)
                                                 for r in ("a/x.txt", "a/deeper/y.txt", "top.txt"))
        assert all(not f.is_dir and f.size == 2 for f in found)

    def test_listings_and_deletes_never_reach_an_adjacent_prefix(self, store: Store, root: str) -> None:
        one, ten = store.join(root, "dataset1"), store.join(root, "dataset10")
        store.write_bytes(store.join(one, "a.txt"), b"1")
        store.write_bytes(store.join(ten, "b.txt"), b"10")
        assert [f.name for f in store.list_files(one)] == ["a.txt"]
        assert [f.name for f in store.list_dir(one)] == ["a.txt"]
        store.delete(one, recursive=True)
        assert store.read_bytes(store.join(ten, "b.txt")) == b"10"
        assert store.list_files(one) == []

    def test_a_missing_directory_lists_nothing_of_an_adjacent_name(self, store: Store, root: str) -> None:
        """A directory that does not exist lists as empty, also when another name starts
        with its name: on Azure, ``dataset1`` listed ``dataset1.bak``'s file, and a
        ``replace`` into the empty ``dataset1`` deleted it (found by the batch stateful machine)."""
        store.write_bytes(store.join(root, "dataset1.bak", "keep.txt"), b"backup")
        missing = store.join(root, "dataset1")
        assert store.list_dir(missing) == []
        assert store.list_files(missing) == []
        assert store.info(missing) is None

    def test_listing_is_consistent(self, store: Store, root: str) -> None:
        self.need(store, caps.LISTING_CONSISTENT)
        fresh = open_store(store.url(root), store.config)  # another client, as another process
        path = store.join(root, f"new-{uuid.uuid4().hex}.txt")
        store.write_bytes(path, b"x")
        assert path in [f.path for f in fresh.list_files(root)]
        store.delete(path)
        assert path not in [f.path for f in fresh.list_files(root)]

    # -- deleting -----------------------------------------------------------------------------
    def test_delete_file_and_tree(self, store: Store, root: str) -> None:
        store.write_bytes(store.join(root, "t", "a"), b"a")
        store.write_bytes(store.join(root, "t", "b", "c"), b"c")
        store.delete(store.join(root, "t", "a"))
        assert not store.exists(store.join(root, "t", "a"))
        store.delete(store.join(root, "t"), recursive=True)
        assert store.list_files(root) == []

    def test_delete_empty_dir_never_removes_contents(self, store: Store, root: str) -> None:
        shared = store.join(root, "_temporary")
        marker = store.join(shared, "other-job", "0", "_job.json")
        store.write_bytes(marker, b"{}")
        store.delete_empty_dir(shared)  # another job is using it: must survive
        assert store.read_bytes(marker) == b"{}"
        store.delete(store.join(shared, "other-job"), recursive=True)
        store.delete_empty_dir(shared)
        assert not store.exists(shared)
        store.delete_empty_dir(shared)  # missing: not an error

    def test_delete_files_deletes_exactly_those(self, store: Store, root: str) -> None:
        paths = [store.join(root, "many", f"{i}.txt") for i in range(5)]
        for path in paths:
            store.write_bytes(path, b"x")
        store.delete_files(paths[:3])
        assert [f.path for f in store.list_files(store.join(root, "many"))] == paths[3:]
        store.delete_files([])

    # -- renames -----------------------------------------------------------------------------------
    def test_rename_file_moves_and_refuses_to_overwrite_unless_asked(self, store: Store, root: str) -> None:
        a, b = store.join(root, "a"), store.join(root, "sub", "b")
        store.write_bytes(a, b"A")
        store.write_bytes(b, b"B")
        with pytest.raises(FileExistsError):
            store.rename_file(a, b)
        assert store.read_bytes(b) == b"B" and store.read_bytes(a) == b"A"
        store.rename_file(a, b, overwrite=True)
        assert store.read_bytes(b) == b"A" and not store.exists(a)
        c = store.join(root, "new", "deep", "c")
        store.rename_file(b, c)
        assert store.read_bytes(c) == b"A" and not store.exists(b)

    def test_rename_of_a_missing_file_fails(self, store: Store, root: str) -> None:
        with pytest.raises(OSError):
            store.rename_file(store.join(root, "absent"), store.join(root, "target"))
        assert not store.exists(store.join(root, "target"))

    def test_rename_dir_moves_a_tree_and_never_nests(self, store: Store, root: str) -> None:
        self.need(store, caps.RENAME_DIRECTORY_ATOMIC)
        src, dst = store.join(root, "src"), store.join(root, "dst")
        store.write_bytes(store.join(src, "x", "f"), b"1")
        store.write_bytes(store.join(dst, "g"), b"2")
        with pytest.raises(FileExistsError):
            store.rename_dir(src, dst)
        assert not store.exists(store.join(dst, "src"))
        store.rename_dir(src, store.join(root, "moved"))
        assert store.read_bytes(store.join(root, "moved", "x", "f")) == b"1" and not store.exists(src)

    def test_rename_outcome_from_evidence(self, store: Store, root: str) -> None:
        src, dst = store.join(root, "r", "src.txt"), store.join(root, "r", "dst.txt")
        store.write_bytes(src, b"payload")
        before = store.info(src)
        assert before is not None
        assert store.rename_outcome(src, dst, before) == "not-done"
        store.rename_file(src, dst)
        # After the rename the evidence says "done", or "unknown" where the store cannot tell:
        # never "not-done", which would make a committer rename (and lose) it again.
        assert store.rename_outcome(src, dst, before) in ("done", "unknown")
        if store.has_capability(caps.RENAME_FILE_ATOMIC) or store.has_capability(
                caps.ETAGS_PRESERVED_IN_RENAME):
            assert store.rename_outcome(src, dst, before) == "done"

    def test_rename_keeps_the_etag_when_declared(self, store: Store, root: str) -> None:
        self.need(store, caps.ETAGS_PRESERVED_IN_RENAME)
        src, dst = store.join(root, "e", "src"), store.join(root, "e", "dst")
        store.write_bytes(src, b"etag me")
        before = store.info(src)
        store.rename_file(src, dst)
        after = store.info(dst)
        assert before is not None and after is not None and before.etag == after.etag

    # -- failures ------------------------------------------------------------------------------------
    def test_transient_failures_are_recognised(self, store: Store) -> None:
        assert store.is_transient(TimeoutError("timed out"))
        assert store.is_transient(ConnectionResetError("reset"))
        assert not store.is_transient(PermissionError("denied"))
        assert not store.is_throttling(FileNotFoundError("x"))

    # -- names: exactly the named path ------------------------------------------------------------
    @pytest.mark.generative
    def test_operations_act_on_exactly_the_named_path(self, store: Store, root: str) -> None:
        """Write, list, exists, open, read, rename, delete act on exactly the path they are
        given, whatever its names hold, and on none of the decoys beside it; a name the
        store cannot hold is refused (UnsupportedNameError) and nothing is written.

        The explicit examples reach every kind of hostile name (:data:`~.names.KINDS`),
        whatever the budget; the test says how many distinct paths it tried (``-rP``)."""
        tried: dict[tuple[str, ...], bool] = {}

        @self.name_settings
        @given(rel=relative_paths())
        @example(rel=["p*.csv"])
        @example(rel=["q[1].csv"])
        @example(rel=["out[1]", "a%2Fb"])
        @example(rel=["café", "x"])
        @example(rel=["end#", "end?"])
        @example(rel=["a b+c=d", "x{1,2}", "100%", "it's"])
        @example(rel=[".dot.", "-dash-", unicodedata.normalize("NFD", "café")])
        @example(rel=["back\\slash"])
        def check(rel: list[str]) -> None:
            assume(not any(c in segment for segment in rel for c in self.server_mishandles))
            tried[tuple(rel)] = check_exact_names(store, store.join(root, uuid.uuid4().hex[:8]),
                                                  rel, self.server_mishandles)

        check()
        reached = Counter(kind for rel in tried for kind in kinds(rel))
        print(f"names property on {type(store).__name__}: {len(tried)} distinct paths "
              f"({sum(tried.values())} held, {len(tried) - sum(tried.values())} refused); "
              + ", ".join(f"{kind} {n}" for kind, n in sorted(reached.items())))
        # A kind the server under test cannot serve is left out (server_mishandles).
        expected = {kind for kind, chars in KINDS.items()
                    if not set(chars) <= set(self.server_mishandles)}
        assert expected | {"unicode", "decomposed", "edge"} <= set(reached), reached
