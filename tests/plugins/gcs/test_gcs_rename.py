"""How the GCS store renames, decided by a probe once per store; exclusive create proven.

Both emulators here lack ``objects.move`` and ignore ``ifGenerationMatch`` on rewrites,
and the probe must say so and fall back; real GCS has both (docs/gcs.md). fake-gcs-server
enforces ``ifGenerationMatch=0`` on uploads: exclusive create is proven against it.
"""

from __future__ import annotations

from typing import Any

import pytest

from outcommit import JobContext, create_committer, describe_capabilities, open_store
from outcommit.testing.conformance import leftovers, run_tasks, visible_files
from outcommit_gcs import GcsStore

pytestmark = pytest.mark.gcs


def counters(store: GcsStore) -> dict[str, int]:
    return dict(store.iostatistics.snapshot()["counters"])


@pytest.fixture(params=["gcp-storage-emulator", "fake-gcs-server"])
def server(request: pytest.FixtureRequest) -> tuple[str, dict[str, Any], str]:
    if request.param == "fake-gcs-server":
        return request.getfixturevalue("fake_gcs_root"), request.getfixturevalue("fake_gcs_config"), \
            request.param
    return request.getfixturevalue("gcs_root"), request.getfixturevalue("gcs_config"), request.param


def test_the_probe_finds_no_move_says_why_and_leaves_nothing(server: tuple[str, dict, str]) -> None:
    root_url, config, name = server
    store = open_store(root_url, config)
    assert isinstance(store, GcsStore)
    root = store.strip(root_url)
    support = store.rename_support(near=f"{root}/tmp/source")
    assert not support.move and not support.guarded
    assert "objects.move not offered" in support.reason
    assert ("501" in support.reason) == (name == "gcp-storage-emulator")
    assert "destination is checked first" in support.reason
    # Two probe objects, one move attempt, one rewrite, two deletes: once per store.
    assert counters(store) == {"object_put_request": 2, "object_move_request": 1,
                               "object_copy_requests": 1, "object_delete_request": 2}
    assert store.rename_support(near=f"{root}/elsewhere/x") is support  # never probed again
    assert counters(store)["object_put_request"] == 2
    assert store.list_files(root) == []


def test_configured_rename_skips_the_probe(gcs_root: str, gcs_config: dict) -> None:
    store = open_store(gcs_root, {**gcs_config, "outcommit.gcs.rename": "rewrite"})
    assert isinstance(store, GcsStore)
    root = store.strip(gcs_root)
    store.write_bytes(f"{root}/a", b"a")
    before = counters(store)
    store.rename_file(f"{root}/a", f"{root}/b")
    after = counters(store)
    # Unguarded rewrite: the destination's metadata, the rewrite, the source's delete.
    assert {k: after.get(k, 0) - before.get(k, 0) for k in after} == {
        "object_put_request": 0, "object_metadata_request": 1, "object_copy_requests": 1,
        "object_delete_request": 1}
    assert store.read_bytes(f"{root}/b") == b"a"


def test_manifest_job_commit_requests_per_file(fake_gcs_root: str, fake_gcs_config: dict) -> None:
    """Pinned: per file one rewrite, one delete, and one metadata probe of the destination
    (only because this server ignores the rewrite's precondition); nothing read."""
    store = open_store(fake_gcs_root, fake_gcs_config)
    assert isinstance(store, GcsStore)
    committer = create_committer(fake_gcs_root, fake_gcs_config, "manifest", store=store)
    job = JobContext(fake_gcs_root, config=committer.config)
    committer.setup_job(job)
    tasks, per_task = 3, 4
    messages, expected = run_tasks(committer, job, tasks, per_task)
    store.rename_support(near=f"{store.strip(fake_gcs_root)}/probe/x")  # the probe, counted apart
    before = counters(store)
    committer.commit_job(job, messages)
    after = counters(store)
    spent = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    files = tasks * per_task
    assert spent["object_copy_requests"] == files
    assert spent.get("object_move_request", 0) == 0
    assert spent.get("action_http_get_request", 0) == 0  # no manifest read: messages carry them
    view = open_store(fake_gcs_root, fake_gcs_config)
    assert visible_files(view, view.strip(fake_gcs_root)) == expected
    assert leftovers(view, view.strip(fake_gcs_root)) == []


def test_exclusive_create_is_declared_only_where_the_server_enforces_it(
        fake_gcs_root: str, fake_gcs_config: dict, gcs_root: str, gcs_config: dict) -> None:
    assert describe_capabilities(fake_gcs_root, fake_gcs_config)["capabilities"]["fs.create.exclusive"]
    assert not describe_capabilities(gcs_root, gcs_config)["capabilities"]["fs.create.exclusive"]
    store = open_store(fake_gcs_root, fake_gcs_config)
    path = f"{store.strip(fake_gcs_root)}/claim.json"
    store.create_exclusive(path, b"first")
    before = counters(store)
    with pytest.raises(FileExistsError):  # the server's 412, one request, no check before it
        store.create_exclusive(path, b"second")
    assert counters(store)["object_put_request"] == before["object_put_request"] + 1
    assert counters(store).get("object_metadata_request", 0) == before.get("object_metadata_request", 0)
    assert store.read_bytes(path) == b"first"
    # Where the server ignores preconditions, exclusive create is neither declared nor there.
    ignoring = open_store(gcs_root, gcs_config)
    assert ignoring.exclusive_create() is None and not hasattr(ignoring, "create_exclusive")
    assert store.exclusive_create() is store


def test_a_move_that_ignores_the_precondition_is_probed_once_and_not_used(
        server: tuple[str, dict, str]) -> None:
    """A server whose objects.move moves onto an existing object (ignoring
    ``ifGenerationMatch=0``): the probe's move consumes its source, which the rewrite probe
    then needs. Neither emulator has objects.move: the real store's move is wrapped to do
    what such a server does (rewrite without the precondition, delete the source)."""
    root_url, config, _ = server
    store = open_store(root_url, config)
    assert isinstance(store, GcsStore)
    root = store.strip(root_url)
    moves: list[tuple[str, str, dict[str, Any]]] = []

    def move_ignoring_the_precondition(bucket: str, src_key: str, dst_key: str,
                                       params: dict[str, Any], once: bool = False) -> None:
        moves.append((src_key, dst_key, dict(params)))
        store._rewrite(bucket, src_key, bucket, dst_key, {})
        store.fs.rm_file(f"{bucket}/{src_key}")

    store._move = move_ignoring_the_precondition  # type: ignore[method-assign]
    support = store.rename_support(near=f"{root}/tmp/source")
    assert len(moves) == 1 and moves[0][2] == {"ifGenerationMatch": "0"}
    assert not support.move and not support.guarded
    assert "objects.move ignores ifGenerationMatch=0" in support.reason
    assert "destination is checked first" in support.reason
    assert store.rename_support(near=f"{root}/elsewhere/x") is support  # never probed again
    assert store.list_files(root) == []
    store.write_bytes(f"{root}/a", b"data")
    store.rename_file(f"{root}/a", f"{root}/b")  # rewrite + delete: the move is not used
    assert len(moves) == 1
    assert store.read_bytes(f"{root}/b") == b"data" and not store.exists(f"{root}/a")


def test_requests_are_counted_through_public_hooks_and_the_filesystem_still_pickles(
        gcs_root: str, gcs_config: dict) -> None:
    """Counted by aiohttp's request tracing, given through gcsfs's public ``session_kwargs``
    (outcommit_gcs.tracing; an instance's ``_call`` was swapped before). fsspec filesystems
    travel to workers pickled: the store's still does, its copy counting nothing."""
    import pickle

    store = open_store(gcs_root, gcs_config)
    assert isinstance(store, GcsStore)
    path = f"{store.strip(gcs_root)}/counted"
    store.write_bytes(path, b"x")
    assert counters(store) == {"object_put_request": 1}
    copy = pickle.loads(pickle.dumps(store.fs))
    assert copy.cat_file(path) == b"x"
    assert counters(store) == {"object_put_request": 1}
    assert store.read_bytes(path) == b"x"
    assert counters(store)["action_http_get_request"] == 1
