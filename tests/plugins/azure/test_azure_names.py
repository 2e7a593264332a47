"""Names on Azurite through the committers (issue 27, defect 4): a file or destination
named ``p*.csv``, ``q[1].csv`` or ``out[1]`` is that name, never a pattern. adlfs's
``rm`` expanded them: ``v2`` replacing ``p*.csv`` deleted ``pa.csv`` too, ``replace``
left ``q[1].csv`` behind, and ``out[1]`` kept its ``__magic_job-*`` directory."""

from __future__ import annotations

from typing import Any

import pytest

from outcommit import JobContext, create_committer, open_store
from outcommit.errors import UnsupportedNameError
from outcommit.testing.conformance import CommitterConformance, leftovers, visible_files
from outcommit_azure.store import adlfs_addresses

pytestmark = pytest.mark.azure


def run_job(url: str, config: dict[str, Any], committer: str, files: dict[str, bytes]) -> Any:
    """One job of one task writing ``files``, committed with its message."""
    chosen = create_committer(url, config, committer)
    job = JobContext(url, config=chosen.config)
    chosen.setup_job(job)
    task = job.task_attempt(0)
    chosen.setup_task(task)
    CommitterConformance.write(chosen, task, files)
    return chosen.commit_job(job, [chosen.commit_task(task)])


def seed(url: str, config: dict[str, Any], files: dict[str, bytes]) -> Any:
    store = open_store(url, config)
    for name, data in files.items():
        store.write_bytes(store.join(store.strip(url), name), data)
    return store


def test_v2_replacing_a_file_leaves_the_files_its_name_would_match(azure_root: str,
                                                                  azure_config: dict) -> None:
    old = {"p*.csv": b"old p*", "pa.csv": b"unrelated pa", "q[1].csv": b"old q[1]",
           "q1.csv": b"unrelated q1"}
    store = seed(azure_root, azure_config, old)
    new = {"p*.csv": b"new p*", "q[1].csv": b"new q[1]"}
    run_job(azure_root, azure_config, "v2", new)
    assert visible_files(store, store.strip(azure_root)) == {**old, **new}


@pytest.mark.parametrize("committer", ["blocklist", "manifest"])
def test_replace_deletes_exactly_the_old_files(azure_root: str, azure_config: dict,
                                               committer: str) -> None:
    config = {**azure_config, "outcommit.committer.conflict-mode": "replace"}
    store = seed(azure_root, config, {"q[1].csv": b"old", "d[1]/x.csv": b"old", "p*.csv": b"old"})
    beside = seed(azure_root + "-beside", config, {"q1.csv": b"keep"})  # what a pattern would reach
    run_job(azure_root, config, committer, {"new.csv": b"new"})
    assert visible_files(store, store.strip(azure_root)) == {"new.csv": b"new"}
    assert visible_files(beside, beside.strip(azure_root + "-beside")) == {"q1.csv": b"keep"}


@pytest.mark.parametrize("committer", ["blocklist", "manifest", "v2"])
def test_a_destination_named_like_a_pattern_leaves_no_temporary_state(
        azure_root: str, azure_config: dict, committer: str) -> None:
    url = f"{azure_root}/out[1]"
    sibling = seed(f"{azure_root}/out1", azure_config, {"keep.txt": b"keep"})
    run_job(url, azure_config, committer, {"part-0.csv": b"data"})
    store = open_store(url, azure_config)
    assert leftovers(store, store.strip(url)) == []
    assert visible_files(store, store.strip(url)) == {"part-0.csv": b"data"}
    assert visible_files(sibling, sibling.strip(f"{azure_root}/out1")) == {"keep.txt": b"keep"}


def test_names_azure_cannot_hold_are_refused_before_anything_is_written(
        azure_root: str, azure_config: dict) -> None:
    store = open_store(azure_root, azure_config)
    root = store.strip(azure_root)
    for name in ("back\\slash.csv", "a?b#c", "v?versionid=1"):
        with pytest.raises(UnsupportedNameError, match="rename it"):
            store.write_bytes(store.join(root, name), b"x")
    with pytest.raises(UnsupportedNameError, match="rename it"):
        create_committer(f"{azure_root}/a?b#c", azure_config, "blocklist").setup_job(
            JobContext(f"{azure_root}/a?b#c"))
    assert store.list_files(root) == []


@pytest.mark.parametrize("name", ["plain", "p*.csv", "a%2Fb", "café", "a#b", "a?b", "a?b#c",
                                  "end#", "end?", "a#b?c", "v?versionid=1", "%", "+ ="])
def test_adlfs_addresses_says_what_adlfs_itself_does(name: str, azure_root: str,
                                                    azure_config: dict) -> None:
    """The rule the store refuses names by, compared with the parsing of adlfs itself."""
    adlfs = open_store(azure_root, azure_config).fs
    path = f"container/dir/{name}"
    container, key, _ = adlfs.split_path(path)
    assert adlfs_addresses(path) == (f"{container}/{key}" == path)
