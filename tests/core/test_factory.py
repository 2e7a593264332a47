"""The factory's store sharing: one store per destination, configuration and plugin in a process."""

from __future__ import annotations

import threading

import pytest

import outcommit
from outcommit import factory
from outcommit.factory import shared_store
from outcommit.plugins import reset_registry
from outcommit.store import StoreSpec
from outcommit.stores.memory import MemoryStore


@pytest.fixture(autouse=True)
def no_shared_stores(monkeypatch) -> None:
    """Each test starts with an empty cache (it is the process's)."""
    monkeypatch.setattr(factory, "_SHARED", {})


def test_task_attempts_share_one_store_per_destination_and_configuration() -> None:
    dest = "memory://shared/table"
    first = shared_store(dest, {"outcommit.committer.threads": "4"})
    assert shared_store(dest, {"outcommit.committer.threads": "4"}) is first
    assert shared_store(dest, {"outcommit.committer.threads": 4}) is first  # values as strings
    assert shared_store(dest, {"outcommit.committer.threads": "8"}) is not first
    assert shared_store("memory://shared/other", {"outcommit.committer.threads": "4"}) is not first
    assert first.config.get_int("outcommit.committer.threads", 1) == 4


def test_a_changed_environment_gets_its_own_store(monkeypatch) -> None:
    """Stores read credentials, regions and endpoints from the environment when made."""
    before = shared_store("memory://shared/env")
    monkeypatch.setenv("AWS_REGION", "eu-west-3")
    assert shared_store("memory://shared/env") is not before
    monkeypatch.delenv("AWS_REGION")
    assert shared_store("memory://shared/env") is before


def test_a_forked_child_does_not_use_its_parents_stores() -> None:
    """A client's connections and locks are not safe across fork."""
    import os

    parent = shared_store("memory://shared/fork")
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child reports whether it got its parent's store, and exits
        os.write(write, b"same" if shared_store("memory://shared/fork") is parent else b"own")
        os._exit(0)
    os.close(write)
    answer = os.read(read, 16)
    os.waitpid(pid, 0)
    assert answer == b"own"
    assert shared_store("memory://shared/fork") is parent


def test_a_store_registered_again_is_not_served_from_the_cache() -> None:
    """Another plugin for the scheme (a test's fault-injecting store, say) gets its own store."""

    class Marked(MemoryStore):
        pass

    class Plugin:
        @outcommit.hookimpl
        def register_stores(self, register) -> None:  # type: ignore[no-untyped-def]
            register.add(StoreSpec(("memory",), lambda url, config: Marked(url, config), "v1",
                                   Marked.capabilities), replace=True)

    before = shared_store("memory://shared/replaced")
    registry = reset_registry(autoload=False)
    try:
        registry.add_plugin(Plugin(), "marked")
        replaced = shared_store("memory://shared/replaced")
        assert isinstance(replaced, Marked) and replaced is not before
    finally:
        reset_registry()
    assert shared_store("memory://shared/replaced") is before


def test_only_the_most_recently_used_stores_are_kept() -> None:
    kept = shared_store("memory://shared/kept")
    churned = []
    for n in range(factory._MAX_SHARED_STORES):
        churned.append(shared_store(f"memory://shared/churn-{n}"))
        shared_store("memory://shared/kept")  # used all along: never the least recent
    assert len(factory._SHARED) == factory._MAX_SHARED_STORES
    assert shared_store("memory://shared/kept") is kept
    assert shared_store("memory://shared/churn-0") is not churned[0]  # the least recent went


def test_a_slow_plugin_does_not_hold_up_other_destinations_stores() -> None:
    """Opening a store (a plugin's factory may make clients, probe an account) happens
    outside the cache's lock: one destination's slow open never waits on another's."""
    other_opened, opening_started = threading.Event(), threading.Event()
    outcomes: list[object] = []

    class Slow(MemoryStore):
        pass

    def open_slowly(url: str, config: object) -> Slow:
        opening_started.set()
        # Returns once the other destination's store was served: a cache that opened
        # stores under its lock would wait here the whole timeout, then fail.
        if not other_opened.wait(60):
            raise AssertionError("the other destination's store waited for this one")
        return Slow(url, config)  # type: ignore[arg-type]

    class Plugin:
        @outcommit.hookimpl
        def register_stores(self, register) -> None:  # type: ignore[no-untyped-def]
            register.add(StoreSpec(("slowstore",), open_slowly, "v1", Slow.capabilities))

    registry = reset_registry(autoload=False)
    try:
        registry.add_plugin(Plugin(), "slow")
        opening = threading.Thread(target=lambda: outcomes.append(_outcome(shared_store, "slowstore://a/t")))
        opening.start()
        try:
            assert opening_started.wait(60)  # the slow open is under way
            served = shared_store("memory://shared/quick")
        finally:
            other_opened.set()
            opening.join()
        assert isinstance(served, MemoryStore)
        assert len(outcomes) == 1 and isinstance(outcomes[0], Slow)
        assert shared_store("slowstore://a/t") is outcomes[0]  # kept once opened
    finally:
        reset_registry()


def test_threads_opening_one_destination_at_once_share_the_store_kept() -> None:
    stores: list[object] = []
    threads = [threading.Thread(target=lambda: stores.append(shared_store("memory://shared/raced")))
               for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    kept = shared_store("memory://shared/raced")
    assert len(stores) == 8 and all(store is kept for store in stores)


def _outcome(fn, *args):  # type: ignore[no-untyped-def]
    try:
        return fn(*args)
    except BaseException as exc:  # the test inspects it
        return exc
