"""Micro-batches without Spark: the tasks and the oracle the streaming tests share.

Each "run" is a StreamingSink with its own run id, as a query restarted from its
checkpoint gets. The oracle: the batch log names exactly the rows each batch read, the
destination's data files are exactly the logged ones, and no temporary state, pending
upload, job record or decision is left.
"""

from __future__ import annotations

import uuid
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from spark_view import spark_view

import outcommit.streaming as streaming
from outcommit import open_store
from outcommit.engine.tasks import WriteSettings, write_attempt
from outcommit.streaming import BatchIdentity, BatchTaskResult, StreamingSink
from outcommit.testing.conformance import leftovers, visible_files

QUERY = str(uuid.uuid4())
ROWS = 60


def batch_table(batch_id: int, rows: int = ROWS) -> pa.Table:
    first = batch_id * 1000
    return pa.table({"id": pa.array(range(first, first + rows), pa.int64()),
                     "part": pa.array([i % 2 for i in range(rows)], pa.int64())})


def run_batch(sink: StreamingSink, run: str, batch_id: int, tasks: int = 2,
              settings: WriteSettings | None = None, query: str = QUERY) -> list[BatchTaskResult]:
    """The batch's tasks (each writes its share of the batch's rows) as Spark runs them."""
    identity = BatchIdentity(query, batch_id, run)
    table = batch_table(batch_id)
    results = []
    for index in range(tasks):
        job = sink.begin_task(identity)
        if job is None:
            results.append(BatchTaskResult(identity, None))
            continue
        share = table.slice(index * table.num_rows // tasks, table.num_rows // tasks)
        attempt = write_attempt(sink.committer, job.task_attempt(index, 0), share.to_batches(),
                                settings or WriteSettings(max_rows_per_file=20))
        results.append(BatchTaskResult(identity, job.job_id, attempt))
    return results


def logged_ids(url: str, config: dict[str, Any]) -> dict[int, list[int]]:
    """Batch id -> the ids its logged files hold."""
    store = open_store(url, config)
    out = {}
    for entry in streaming.committed_batches(url, config):
        ids: list[int] = []
        for f in entry.files:
            with store.fs.open(store.join(store.strip(url), f.path), "rb") as fh:
                ids += pq.read_table(fh).column("id").to_pylist()
        out[entry.batch_id] = sorted(ids)
        assert entry.rows == len(ids)
    return out


def expected_ids(batches: range) -> dict[int, list[int]]:
    return {b: sorted(batch_table(b).column("id").to_pylist()) for b in batches}


def assert_exactly_once(url: str, config: dict[str, Any], batches: range) -> None:
    # Plain asserts with messages: this is a helper module (pytest does not rewrite it).
    logged_rows, expected = logged_ids(url, config), expected_ids(batches)
    assert logged_rows == expected, f"logged rows {logged_rows} != {expected}"
    store = open_store(url, config)
    dest = store.strip(url)
    logged = {f.path for e in streaming.committed_batches(url, config) for f in e.files}
    visible = set(visible_files(store, dest))
    assert visible == logged, f"data files that no batch committed: {sorted(visible - logged)}"
    # Spark's own readers (its _spark_metadata log) see exactly the logged files too.
    seen = spark_view(store, dest)
    if seen is not None or batches:
        assert seen == sorted(logged), f"Spark's readers see {seen}, the log names {sorted(logged)}"
    left = leftovers(store, dest)
    assert left == [], f"temporary state left behind: {left}"
    records, decided = streaming.BatchLog(store, dest).job_states()
    assert records == [], f"job records left behind: {records}"
    assert decided == [], f"decisions left behind: {decided}"
