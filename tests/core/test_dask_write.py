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
    # A thread per partition on each worker: a test's held tasks never starve the others.
    with distributed.LocalCluster(n_workers=2, threads_per_worker=PARTITIONS, processes=True,
                                  dashboard_address=None,
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


def _wait_for(path: Path, timeout: float) -> bool:
    """True once ``path`` exists (polled: the flag may come from another process)."""
    import time

    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def _load_partition(flags: str, index: int) -> Any:
    """Partition ``index``'s input; partition 3's fails once partition 1 is writing."""
    if index == 3:
        if not _wait_for(Path(flags, "writing"), 60):
            raise TimeoutError("partition 1 never started writing")
        raise ValueError("input of partition 3 is unreadable")
    return frame().iloc[index * 300:(index + 1) * 300]


def _partition_held_until_go(flags: str, part: Any, plan: Any, index: int) -> Any:
    """``outcommit.dask._write_partition`` whose partition 1 starts, then waits for the
    "go" flag (the client aborts, or says it waits for every task) before it writes."""
    import outcommit.dask as odask

    try:
        if index == 1:
            Path(flags, "writing").touch()
            if not _wait_for(Path(flags, "go"), 60):
                Path(flags, "timed-out").touch()
                raise TimeoutError("the client neither aborted nor waited for partition 1")
        try:
            return odask._write_attempt(part, plan, index)
        except Exception as exc:
            return odask._Failure(index, f"{type(exc).__name__}: {exc}")
    finally:
        if index == 1:
            Path(flags, "ended").touch()


@pytest.mark.parametrize("scheduler", ["threads", "distributed", "client"])
def test_an_upstream_failure_aborts_only_once_every_partition_ended(
        scheduler: str, target: Any, tmp_path: Path, request: pytest.FixtureRequest,
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """Partition 3's input fails while partition 1's write task is running: Dask raises at
    once, but the client must abort only once partition 1 has ended (else its files land
    in a job already aborted and cleaned up). Partition 1 (the real write, wrapped) holds
    until the client either starts its abort (the real ``abort_job``, wrapped) or logs
    that it waits for every task: a client that aborts without waiting lets partition 1
    write only after the abort began, every time."""
    import functools
    import logging
    import sys

    from dask import delayed

    import outcommit.dask
    from outcommit.factory import create_committer

    url, config, committer = target
    flags = tmp_path / "flags"
    flags.mkdir()
    compute_kwargs: dict[str, Any] = {"scheduler": "threads", "num_workers": PARTITIONS}
    if scheduler != "threads":
        import cloudpickle

        client = request.getfixturevalue("cluster")
        # the worker processes run this module's functions: ship them by value
        cloudpickle.register_pickle_by_value(sys.modules[__name__])
        request.addfinalizer(lambda: cloudpickle.unregister_pickle_by_value(sys.modules[__name__]))
        compute_kwargs = {"scheduler": client if scheduler == "client" else "distributed"}

    aborts: list[bool] = []  # for each abort: had partition 1 ended?

    def committer_with_watched_abort(*args: Any, **kwargs: Any) -> Any:
        created = create_committer(*args, **kwargs)
        real_abort = created.abort_job

        def abort_job(job: Any) -> Any:
            aborts.append((flags / "ended").exists())
            (flags / "go").touch()
            return real_abort(job)

        created.abort_job = abort_job  # type: ignore[method-assign]
        return created

    class WaitingSaid(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if outcommit.dask.WAITING in record.getMessage():
                (flags / "go").touch()

    caplog.set_level(logging.INFO, logger="outcommit.dask")
    handler = WaitingSaid(logging.INFO)
    logging.getLogger("outcommit.dask").addHandler(handler)
    request.addfinalizer(lambda: logging.getLogger("outcommit.dask").removeHandler(handler))
    monkeypatch.setattr(outcommit.dask, "create_committer", committer_with_watched_abort)
    monkeypatch.setattr(outcommit.dask, "_write_partition",
                        functools.partial(_partition_held_until_go, str(flags)))
    parts = dd.from_delayed([delayed(_load_partition)(str(flags), i) for i in range(PARTITIONS)],
                            meta=frame().iloc[:0])
    with pytest.raises(Exception, match="input of partition 3"):
        outcommit.dask.to_parquet(parts, url, committer=committer, config=config, max_rows_per_file=100,
                                  max_attempts=1, **compute_kwargs)
    assert (flags / "writing").exists(), "partition 1 was not writing when partition 3 failed"
    assert _wait_for(flags / "ended", 120), "partition 1 never ended"  # a straggler's files are there now
    assert not (flags / "timed-out").exists(), "the client neither aborted nor said it waits"
    assert aborts == [True], f"the client aborted before partition 1 ended (aborts: {aborts})"
    store = open_store(url, config)
    assert visible_files(store, store.strip(url)) == {}
    assert leftovers(store, store.strip(url)) == []
    assert not store.exists(store.join(store.strip(url), "_SUCCESS"))


def _parquet_schema(url: str) -> Any:
    """The dataset's schema as a reader of the committed files sees it (names, types)."""
    import outcommit.read

    table = outcommit.read.dataset(url).to_table()
    return table.num_rows, [(f.name, f.type) for f in table.schema]


@pytest.mark.parametrize("rows", ["none", "partitions-2-and-3"])
def test_an_empty_frame_leaves_a_readable_dataset(tmp_path: Path, rows: str) -> None:
    """Issue 27: an empty frame committed only _SUCCESS, so readers found no columns (Spark
    and the local engine write task 0's schema-only file). As Spark's writer: partition 0
    writes one file with the schema and no rows when it got none, whatever the others got."""
    import pyarrow.parquet as pq

    import outcommit.dask

    full = ddf()
    kept = full[full.id < 0] if rows == "none" else full[full.id >= ROWS // 2]
    empty_url, full_url = f"file://{tmp_path}/empty", f"file://{tmp_path}/full"
    outcommit.dask.to_parquet(kept, empty_url, scheduler="threads")
    outcommit.dask.to_parquet(full, full_url, scheduler="threads")
    count, schema = _parquet_schema(empty_url)
    assert count == (0 if rows == "none" else ROWS // 2)
    assert schema == _parquet_schema(full_url)[1]  # the columns and types a full write has
    assert [name for name, _ in schema] == ["id", "day", "amount"]
    schema_only = [p for p in (tmp_path / "empty").glob("part-00000-*.parquet")]
    assert len(schema_only) == 1 and pq.read_metadata(schema_only[0]).num_rows == 0


def test_an_empty_partition_of_untyped_columns_writes_no_schema_file(tmp_path: Path) -> None:
    """With dask's string conversion off, an empty partition's object column has no type
    (Arrow's null): partition 0's schema-only file made readers take the column as null,
    and the other partitions' strings failed to read ('Unsupported cast from string to
    null'). No such file then: the rows read back."""
    import dask

    import outcommit.dask
    import outcommit.read

    url = f"file://{tmp_path}/out"
    with dask.config.set({"dataframe.convert-string": False}):
        full = ddf()
        outcommit.dask.to_parquet(full[full.id >= ROWS // 2], url, scheduler="threads")
    table = outcommit.read.dataset(url).to_table()
    assert sorted(table.column("id").to_pylist()) == list(range(ROWS // 2, ROWS))
    assert not list((tmp_path / "out").glob("part-00000-*"))
