"""Ray Data writes through outcommit on a local Ray cluster: retries leave exactly-once output.

Each write splits a table into 4 blocks, one write task each. The injected failure makes
attempt 0 of task 1 die after its first file is closed (its worker process exits: for
magic an upload is pending, for v1 an attempt directory is left), and Ray's task retry
(``max_retries``) runs attempt 1. The oracle: exactly the input rows, task 1's data only
from attempt 1, no temporary state or pending upload, and ``_SUCCESS`` saying so.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from outcommit import load_success, open_store
from outcommit.testing.conformance import leftovers, visible_files

ray = pytest.importorskip("ray")
pytest.importorskip("ray.data")

ROWS, TASKS = 2000, 4
PART = re.compile(r"part-(\d{5})-\d{3}-.*-a(\d+)\.parquet$")


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[None]:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False,
             object_store_memory=128 * 1024 * 1024)
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    yield
    ray.shutdown()


def table() -> pa.Table:
    ids = list(range(ROWS))
    return pa.table({"id": pa.array(ids, pa.int64()),
                     "day": [f"2024-05-0{1 + i % 3}" for i in ids],
                     "amount": [i * 0.5 for i in ids]})


def dataset() -> Any:
    return ray.data.from_arrow(table()).repartition(TASKS)


def read_rows(url: str, config: dict[str, Any]) -> list[tuple[Any, ...]]:
    import pyarrow.dataset as ds

    store = open_store(url, config)
    root = store.strip(url)
    files = [f"{root}/{rel}" for rel in visible_files(store, root)]
    got = ds.dataset(files, filesystem=store.fs, format="parquet", partitioning="hive",
                     partition_base_dir=root).to_table()
    return sorted(zip(got.column("id").to_pylist(), got.column("amount").to_pylist(), strict=True))


def attempts_by_task(url: str, config: dict[str, Any]) -> dict[int, set[int]]:
    store = open_store(url, config)
    found: dict[int, set[int]] = {}
    for rel in visible_files(store, store.strip(url)):
        match = PART.search(rel)
        assert match, rel
        found.setdefault(int(match.group(1)), set()).add(int(match.group(2)))
    return found


@pytest.fixture(params=["file-v1", "file-manifest", pytest.param("s3-magic", marks=pytest.mark.s3)])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, dict[str, Any], str]:
    store, committer = request.param.split("-")
    if store == "file":
        return f"file://{tmp_path}/out-{uuid.uuid4().hex[:6]}", {}, committer
    return (f"{request.getfixturevalue('s3_root')}/ray", dict(request.getfixturevalue("s3_server").config),
            committer)


def test_a_retried_task_leaves_exactly_once_output(ray_cluster: None, target: Any) -> None:
    import outcommit.ray

    url, config, committer = target
    sink = outcommit.ray.Datasink(url, committer=committer, config=config, partition_by=["day"],
                                  max_rows_per_file=100, fail_task_once=1)
    dataset().write_datasink(sink, ray_remote_args={"max_retries": 2})

    expected = sorted(zip(table().column("id").to_pylist(), table().column("amount").to_pylist(),
                          strict=True))
    assert read_rows(url, config) == expected
    attempts = attempts_by_task(url, config)
    assert attempts == {0: {0}, 1: {1}, 2: {0}, 3: {0}}, "task 1 must be visible from its retry only"
    store = open_store(url, config)
    assert leftovers(store, store.strip(url)) == []
    summary = load_success(store, store.join(store.strip(url), "_SUCCESS"))
    assert (summary.committer, summary.success) == (committer, True)
    assert summary.metrics["rows.written"] == ROWS
    assert summary.metrics["ray.task.retries"] == 1
    assert [(r.task_index, r.attempt) for r in sink.results] == [(0, 0), (1, 1), (2, 0), (3, 0)]
    committed = [(r.task_index, r.attempt) for r in sink.results]
    print(f"\n{url} ({committer}): task attempts committed {committed}, "
          f"rows in {ROWS}, rows out {len(read_rows(url, config))}, _SUCCESS ray.task.retries="
          f"{summary.metrics['ray.task.retries']}")


def test_a_failed_write_leaves_nothing(ray_cluster: None, target: Any) -> None:
    import outcommit.ray

    url, config, committer = target
    # Every attempt of task 2 raises after a file; no retry of exceptions: the write fails.
    sink = outcommit.ray.Datasink(url, committer=committer, config=config, max_rows_per_file=100,
                                  fail_task_once=2, failure="raise")
    with pytest.raises(Exception, match="injected failure"):
        dataset().write_datasink(sink, ray_remote_args={"max_retries": 0})
    store = open_store(url, config)
    assert visible_files(store, store.strip(url)) == {}
    assert leftovers(store, store.strip(url)) == []
    assert not store.exists(store.join(store.strip(url), "_SUCCESS"))


def test_an_unsafe_committer_fails_before_any_task(ray_cluster: None, tmp_path: Path) -> None:
    import outcommit.ray
    from outcommit import UnknownCommitterError

    with pytest.raises(UnknownCommitterError):
        outcommit.ray.Datasink(f"file://{tmp_path}/out", committer="no-such-committer")


def _blocks_across_the_abort(flags: str) -> Iterator[pa.Table]:
    """A task's input: one block, then (once the driver has aborted the job) another."""
    import time

    yield table().slice(0, 250)  # files closed before the abort
    Path(flags, "first-block").touch()
    deadline = time.monotonic() + 60
    while not Path(flags, "aborted").exists():
        if time.monotonic() > deadline:
            raise TimeoutError("the driver never aborted the job")
        time.sleep(0.01)
    yield table().slice(250, 250)  # and after it


def _write_in_a_task(sink: Any, flags: str, task_idx: int, blocks: Any = None) -> str:
    """The sink's real ``write`` in a Ray worker; what it raised, or "" if nothing."""
    from types import SimpleNamespace

    try:
        sink.write(blocks if blocks is not None else _blocks_across_the_abort(flags),
                   SimpleNamespace(task_idx=task_idx))
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return ""


def test_a_task_still_writing_when_the_job_is_aborted_cleans_up_after_itself(
        ray_cluster: None, target: Any, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """Ray Data calls on_write_failed without waiting for the other tasks: one may still be
    writing. Here a Ray task (a worker process running the sink's real ``write``, with
    Ray's real GCS) gets its second block only after the driver aborted the job; it then
    closes a file, sees the mark and cleans up after itself."""
    import sys
    import time

    from ray import cloudpickle

    import outcommit.ray

    url, config, committer = target
    flags = tmp_path / "flags"
    flags.mkdir()
    # workers run this module's code (shipped by value with Ray's own cloudpickle)
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    request.addfinalizer(lambda: cloudpickle.unregister_pickle_by_value(sys.modules[__name__]))
    sink = outcommit.ray.Datasink(url, committer=committer, config=config, max_rows_per_file=100)
    sink.on_write_start()
    task = ray.remote(max_retries=0)(_write_in_a_task)
    running = task.remote(sink, str(flags), 1)
    deadline = time.monotonic() + 120
    while not (flags / "first-block").exists():
        assert time.monotonic() < deadline, "the task never wrote its first block"
        done, _ = ray.wait([running], timeout=0)
        assert not done, f"the task ended before its first block: {ray.get(running)}"
        time.sleep(0.01)
    sink.on_write_failed(RuntimeError("another task failed"))
    (flags / "aborted").touch()
    raised = ray.get(running, timeout=120)
    # (v1, manifest: the file's own check after its write finds the job ended first.)
    assert re.search(r"CommitError: .*(was aborted while task 1 wrote|is not active"
                     r"|ended while task attempt \S+ was writing)", raised), raised
    store = open_store(url, config)
    assert visible_files(store, store.strip(url)) == {}
    assert leftovers(store, store.strip(url)) == []
    # a task starting after the abort writes nothing
    raised = ray.get(task.remote(sink, str(flags), 2, [table()]), timeout=120)
    assert "writes nothing" in raised, raised
    assert leftovers(store, store.strip(url)) == []


def test_a_task_that_cannot_read_the_abort_mark_fails(ray_cluster: None, tmp_path: Path) -> None:
    """Fail closed: the driver's job-state actor gone (terminated for real, by Ray's own
    actor call, ordered before the task's) fails the task rather than let it keep its
    output; the driver's next write starts another actor and commits."""
    import contextlib
    from types import SimpleNamespace

    import outcommit.ray
    from outcommit import CommitError

    url = f"file://{tmp_path}/out"
    sink = outcommit.ray.Datasink(url, committer="v1", max_rows_per_file=100)
    sink.on_write_start()
    with contextlib.suppress(ray.exceptions.RayActorError):
        ray.get(sink.states.__ray_terminate__.remote())
    with pytest.raises(CommitError, match="cannot tell whether the job was aborted"):
        sink.write(iter([table()]), SimpleNamespace(task_idx=0))
    again = f"file://{tmp_path}/again"
    dataset().write_datasink(outcommit.ray.Datasink(again, committer="v1"))
    assert load_success(open_store(again), f"{tmp_path}/again/_SUCCESS").metrics["ray.tasks"] == TASKS


def test_job_states_number_each_tasks_attempts_and_keep_abort_marks() -> None:
    """What the driver's actor answers (the class itself, without Ray)."""
    from outcommit.ray import JobStates

    states = JobStates()
    assert [states.next_attempt("a", 1) for _ in range(3)] == [0, 1, 2]
    assert (states.next_attempt("a", 2), states.next_attempt("b", 1)) == (0, 0)
    states.mark_aborted("b")
    states.forget("a")
    states.forget("b")
    assert states.next_attempt("a", 1) == 0
    assert (states.is_aborted("a"), states.is_aborted("b")) == (False, True)


def _read_back(url: str) -> tuple[int, list[tuple[str, pa.DataType]]]:
    """(rows, columns with their types) as a reader of the committed files sees them."""
    import outcommit.read

    got = outcommit.read.dataset(url).to_table()
    return got.num_rows, [(f.name, f.type) for f in got.schema]


def _schema_only_files(root: Path) -> list[Path]:
    import pyarrow.parquet as pq

    return [p for p in root.glob("part-00000-*.parquet") if pq.read_metadata(p).num_rows == 0]


COLUMNS = [("id", pa.int64()), ("day", pa.string()), ("amount", pa.float64())]


@pytest.mark.filterwarnings("ignore:Use 'expr' instead of 'fn'")
@pytest.mark.parametrize("source", ["arrow", "pandas"])
def test_an_empty_dataset_leaves_a_readable_dataset(ray_cluster: None, tmp_path: Path,
                                                    source: str) -> None:
    """Issue 27: an empty dataset committed only _SUCCESS, so readers found no columns
    (Spark and the local engine write task 0's schema-only file); as Spark's writer, task 0
    writes one file with the schema and no rows when it got none."""
    import outcommit.ray

    data = ray.data.from_arrow(table()) if source == "arrow" else \
        ray.data.from_pandas(table().to_pandas())
    url = f"file://{tmp_path}/out"
    # A filter by function: Ray hands the tasks empty blocks with their columns.
    data.repartition(TASKS).filter(lambda row: row["id"] < 0).write_datasink(
        outcommit.ray.Datasink(url))
    assert _read_back(url) == (0, COLUMNS)
    assert len(_schema_only_files(tmp_path / "out")) == 1


@pytest.mark.parametrize("how", ["limit", "filter-expr"])
def test_a_dataset_ray_tells_no_schema_of_commits(ray_cluster: None, tmp_path: Path,
                                                  how: str) -> None:
    """``limit(0)`` gives the sink no block, so Ray never calls on_write_start: the write
    failed with 'the outcommit Datasink's job was not set up' (found with issue 27). A
    filter by expression hands the tasks empty blocks of no columns. Either way Ray tells
    the sink no schema: given one (``schema=ds.schema()``), task 0's file is written (on the
    driver if no task ran); without, the job commits its empty output."""
    from ray.data.expressions import col

    import outcommit.ray
    from outcommit import load_success

    data = ray.data.from_arrow(table()).repartition(TASKS)
    empty = data.limit(0) if how == "limit" else data.filter(expr=col("id") < 0)
    url, bare = f"file://{tmp_path}/out", f"file://{tmp_path}/bare"
    empty.write_datasink(outcommit.ray.Datasink(url, schema=empty.schema()))
    assert _read_back(url) == (0, COLUMNS)
    assert len(_schema_only_files(tmp_path / "out")) == 1
    empty.write_datasink(outcommit.ray.Datasink(bare))
    store = open_store(bare)
    assert load_success(store, store.join(store.strip(bare), "_SUCCESS")).success
    assert visible_files(store, store.strip(bare)) == {}
    assert leftovers(store, store.strip(bare)) == []
