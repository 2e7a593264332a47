"""Dask DataFrame writes through outcommit: each partition a task attempt, the client commits.

The crash test runs on a distributed LocalCluster of two worker processes: the first
execution of partition 1 exits its worker process after closing a file (for magic an
upload is pending, for v1 an attempt directory is left); the scheduler runs the
partition again on a fresh worker. The oracle: exactly the input rows, one execution's
files per partition, no temporary state or pending upload.
"""

from __future__ import annotations

import re
import uuid
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from outcommit import load_success, open_store
from outcommit.testing.conformance import leftovers, visible_files

dd = pytest.importorskip("dask.dataframe")
pd = pytest.importorskip("pandas")

ROWS, PARTITIONS = 1200, 4
PART = re.compile(r"part-(\d{5})-\d{3}-.*-a(\d+)\.parquet$")


def frame() -> Any:
    ids = list(range(ROWS))
    return pd.DataFrame({"id": ids, "day": [f"2024-05-0{1 + i % 3}" for i in ids],
                         "amount": [i * 0.5 for i in ids]})


def ddf() -> Any:
    return dd.from_pandas(frame(), npartitions=PARTITIONS)


def read_ids(url: str, config: dict[str, Any]) -> list[int]:
    import pyarrow.dataset as ds

    store = open_store(url, config)
    root = store.strip(url)
    files = [f"{root}/{rel}" for rel in visible_files(store, root)]
    table = ds.dataset(files, filesystem=store.fs, format="parquet", partitioning="hive",
                       partition_base_dir=root).to_table(columns=["id"])
    return sorted(table.column("id").to_pylist())


def executions_by_partition(url: str, config: dict[str, Any]) -> dict[int, set[int]]:
    store = open_store(url, config)
    found: dict[int, set[int]] = defaultdict(set)
    for rel in visible_files(store, store.strip(url)):
        match = PART.search(rel)
        assert match, rel
        found[int(match.group(1))].add(int(match.group(2)))
    return dict(found)


def assert_exactly_once(url: str, config: dict[str, Any], committer: str) -> None:
    assert read_ids(url, config) == list(range(ROWS))
    executions = executions_by_partition(url, config)
    assert sorted(executions) == list(range(PARTITIONS))
    assert all(len(a) == 1 for a in executions.values()), f"several executions visible: {executions}"
    store = open_store(url, config)
    assert leftovers(store, store.strip(url)) == []
    summary = load_success(store, store.join(store.strip(url), "_SUCCESS"))
    assert (summary.committer, summary.success) == (committer, True)
    assert summary.metrics["rows.written"] == ROWS


@pytest.fixture(params=["file-v1", "file-manifest", pytest.param("s3-magic", marks=pytest.mark.s3)])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, dict[str, Any], str]:
    store, committer = request.param.split("-")
    if store == "file":
        return f"file://{tmp_path}/out-{uuid.uuid4().hex[:6]}", {}, committer
    return (f"{request.getfixturevalue('s3_root')}/dask", dict(request.getfixturevalue("s3_server").config),
            committer)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  host="127.0.0.1") as local, distributed.Client(local) as client:
        yield client


def test_threads_write_exactly_once(target: Any) -> None:
    import outcommit.dask

    url, config, committer = target
    result = outcommit.dask.to_parquet(ddf(), url, committer=committer, config=config,
                                       partition_by=["day"], max_rows_per_file=100, scheduler="threads")
    assert_exactly_once(url, config, committer)
    assert sorted(r.task_index for r in result.results) == list(range(PARTITIONS))


def test_a_crashed_worker_reruns_its_partition_exactly_once(cluster: Any, target: Any,
                                                            tmp_path: Path) -> None:
    import outcommit.dask

    url, config, committer = target
    markers = tmp_path / "markers"
    markers.mkdir()
    result = outcommit.dask.to_parquet(ddf(), url, committer=committer, config=config,
                                       partition_by=["day"], max_rows_per_file=100,
                                       fail_partition_once=1, failure="crash", marker_dir=str(markers))
    assert (markers / "partition-1.failed").exists(), "the first execution of partition 1 never ran"
    assert_exactly_once(url, config, committer)
    print(f"\n{url} ({committer}): partition 1's first execution crashed its worker; committed "
          f"executions {sorted((r.task_index, r.attempt) for r in result.results)}")


def test_a_failed_execution_is_run_again_by_the_client(target: Any, tmp_path: Path) -> None:
    import outcommit.dask

    url, config, committer = target
    result = outcommit.dask.to_parquet(ddf(), url, committer=committer, config=config, max_rows_per_file=100,
                                       fail_partition_once=2, marker_dir=str(tmp_path), scheduler="threads")
    assert_exactly_once(url, config, committer)
    assert result.summary.metrics["dask.partition.reruns"] == 1


def test_a_failed_write_leaves_nothing(target: Any, tmp_path: Path) -> None:
    """Partition 2 fails and is not retried; the others have ended before the client aborts."""
    import outcommit.dask

    url, config, committer = target
    with pytest.raises(Exception, match="partition 2: InjectedFailure: injected failure"):
        outcommit.dask.to_parquet(ddf(), url, committer=committer, config=config, max_rows_per_file=100,
                                  fail_partition_once=2, marker_dir=str(tmp_path), max_attempts=1,
                                  scheduler="threads")
    store = open_store(url, config)
    assert visible_files(store, store.strip(url)) == {}
    assert leftovers(store, store.strip(url)) == []
    assert not store.exists(store.join(store.strip(url), "_SUCCESS"))



def test_an_upstream_failure_aborts_only_once_every_partition_ended(
        target: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Partition 3's input fails while partition 1's write task is running: the threaded
    scheduler raises at once, but the client must abort only once partition 1 has ended
    (else its files land in a job already aborted and cleaned up). The timing is forced
    by wrapping the real partition write: it starts, waits for the failure, then writes."""
    import threading

    from dask import delayed

    import outcommit.dask

    url, config, committer = target
    writing, failed, ended = threading.Event(), threading.Event(), threading.Event()
    rows = frame()
    real_write = outcommit.dask._write_attempt

    def write_after_the_failure(part: Any, plan: Any, index: int) -> Any:
        if index != 1:
            return real_write(part, plan, index)
        writing.set()
        failed.wait(60)
        try:
            return real_write(part, plan, index)
        finally:
            ended.set()

    def load(index: int) -> Any:
        if index == 3:
            writing.wait(60)
            failed.set()
            raise ValueError("input of partition 3 is unreadable")
        return rows.iloc[index * 300:(index + 1) * 300]

    monkeypatch.setattr(outcommit.dask, "_write_attempt", write_after_the_failure)
    parts = dd.from_delayed([delayed(load)(i) for i in range(PARTITIONS)], meta=rows.iloc[:0])
    with pytest.raises(ValueError, match="input of partition 3"):
        outcommit.dask.to_parquet(parts, url, committer=committer, config=config, max_rows_per_file=100,
                                  scheduler="threads", num_workers=PARTITIONS)
    assert writing.is_set() and failed.is_set(), "partition 1 was not writing when partition 3 failed"
    ended_before_abort = ended.is_set()
    ended.wait(60)  # a straggler's files, if any, are there now
    store = open_store(url, config)
    assert visible_files(store, store.strip(url)) == {}
    assert leftovers(store, store.strip(url)) == []
    assert not store.exists(store.join(store.strip(url), "_SUCCESS"))
    assert ended_before_abort
