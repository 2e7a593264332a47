"""Names on the GCS emulator through the committers (issue 27, defect 4): a file or
destination named ``p*.csv``, ``q[1].csv`` or ``out[1]`` is that name, never a pattern.
gcsfs's ``rm`` expanded them: ``v2`` replacing ``p*.csv`` deleted ``pa.csv`` too,
``manifest`` under ``replace`` left ``q[1].csv`` and ``d[1]/x.csv`` beside the new data,
and ``out[1]`` kept its ``_temporary`` directory."""

from __future__ import annotations

from typing import Any

import pytest

from outcommit import JobContext, create_committer, open_store
from outcommit.testing.conformance import CommitterConformance, leftovers, visible_files

pytestmark = pytest.mark.gcs


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


def test_v2_replacing_a_file_leaves_the_files_its_name_would_match(gcs_root: str,
                                                                  gcs_config: dict) -> None:
    old = {"p*.csv": b"old p*", "pa.csv": b"unrelated pa", "q[1].csv": b"old q[1]",
           "q1.csv": b"unrelated q1"}
    store = seed(gcs_root, gcs_config, old)
    new = {"p*.csv": b"new p*", "q[1].csv": b"new q[1]"}
    run_job(gcs_root, gcs_config, "v2", new)
    assert visible_files(store, store.strip(gcs_root)) == {**old, **new}


def test_manifest_replace_deletes_exactly_the_old_files(gcs_root: str, gcs_config: dict) -> None:
    config = {**gcs_config, "outcommit.committer.conflict-mode": "replace"}
    store = seed(gcs_root, config, {"q[1].csv": b"old", "d[1]/x.csv": b"old", "p*.csv": b"old"})
    beside = seed(gcs_root + "-beside", config, {"q1.csv": b"keep"})  # what a pattern would reach
    run_job(gcs_root, config, "manifest", {"new.csv": b"new"})
    assert visible_files(store, store.strip(gcs_root)) == {"new.csv": b"new"}
    assert visible_files(beside, beside.strip(gcs_root + "-beside")) == {"q1.csv": b"keep"}


@pytest.mark.parametrize("committer", ["manifest", "v2"])
def test_a_destination_named_like_a_pattern_leaves_no_temporary_state(
        gcs_root: str, gcs_config: dict, committer: str) -> None:
    url = f"{gcs_root}/out[1]"
    sibling = seed(f"{gcs_root}/out1", gcs_config, {"keep.txt": b"keep"})
    run_job(url, gcs_config, committer, {"part-0.csv": b"data"})
    store = open_store(url, gcs_config)
    assert leftovers(store, store.strip(url)) == []
    assert visible_files(store, store.strip(url)) == {"part-0.csv": b"data"}
    assert visible_files(sibling, sibling.strip(f"{gcs_root}/out1")) == {"keep.txt": b"keep"}


def test_batch_delete_takes_exactly_the_names_it_is_given(gcs_root: str, gcs_config: dict) -> None:
    """delete_many hands gcsfs's rm the plain names (one call); a name rm would read as a
    pattern is deleted by itself."""
    store = seed(gcs_root, gcs_config, {"p*.csv": b"go", "q[1].csv": b"go", "plain.csv": b"go",
                                        "pa.csv": b"keep", "q1.csv": b"keep"})
    root = store.strip(gcs_root)
    batch = store.batch_delete()
    assert batch is not None
    batch.delete_many([f"{root}/p*.csv", f"{root}/q[1].csv", f"{root}/plain.csv", f"{root}/gone.csv"])
    assert visible_files(store, root) == {"pa.csv": b"keep", "q1.csv": b"keep"}
