"""``outcommit demo``: write a generated dataset through a committer, then verify it.

This first version runs on the local engine (no Spark): it writes a generated event
dataset, partitioned by date, through ``v1`` into a local directory, with one task's
first attempt failing mid-write, and checks the result row by row.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import tempfile
import time
from typing import Any


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", choices=["file"], default="file", help="where to write")
    parser.add_argument("--committer", default=None, help="committer name (default: the store's)")
    parser.add_argument("--rows", type=int, default=200_000, help="rows to generate")
    parser.add_argument("--tasks", type=int, default=8, help="number of tasks")
    parser.add_argument("--dest", default=None, help="destination URL (default: a temp directory)")
    parser.add_argument("--keep", action="store_true", help="keep the output and print where it is")


def generate(rows: int, tasks: int) -> list[Any]:
    import pyarrow as pa
    import pyarrow.compute as pc

    per_task = -(-rows // tasks)
    tables = []
    kinds = pa.array(["view", "click", "purchase", "signup", "logout"])
    for task in range(tasks):
        start, stop = task * per_task, min(rows, (task + 1) * per_task)
        ids = pa.array(range(start, stop), pa.int64())
        tables.append(pa.table({
            "event_id": ids,
            "user_id": pc.remainder(pc.multiply(ids, 7919), 100_003),
            "kind": pc.take(kinds, pc.remainder(ids, 5)),
            "amount_cents": pc.remainder(pc.multiply(ids, 31), 10_000),
            "date": pc.take(pa.array([f"2026-11-{d:02d}" for d in range(1, 8)]), pc.remainder(ids, 7)),
        }))
    return tables


def checksum(table: Any) -> tuple[int, str]:
    """Row count and an order-independent digest of (event_id, user_id, amount, date)."""
    import pyarrow.compute as pc

    total = 0
    rows = table.num_rows
    for name in ("event_id", "user_id", "amount_cents"):
        total = (total * 1_000_003 + pc.sum(table[name].cast("int64")).as_py()) % (1 << 61)
    dates = sorted(pc.value_counts(table["date"].cast("string")).to_pylist(),
                   key=lambda d: d["values"])
    digest = hashlib.sha256(f"{total}|{dates}".encode()).hexdigest()[:16]
    return rows, digest


def main(args: argparse.Namespace) -> int:
    import pyarrow as pa
    import pyarrow.dataset as ds

    from .engine.local import FailurePoint, LocalDriver
    from .factory import open_store
    from .success import SUCCESS_FILE, load_success

    workdir = None
    dest = args.dest
    if dest is None:
        workdir = tempfile.mkdtemp(prefix="outcommit-demo-")
        dest = f"file://{workdir}/events"
    print(f"[demo] generating {args.rows:,} event rows in {args.tasks} tasks")
    tables = generate(args.rows, args.tasks)
    expected = checksum(pa.concat_tables(tables))
    started = time.monotonic()
    driver = LocalDriver(dest, committer=args.committer, partition_by=["date"], workers=2,
                         max_rows_per_file=max(1, args.rows // (args.tasks * 4)),
                         failures=[FailurePoint(task=min(3, args.tasks - 1), attempt=0,
                                                point="mid-write", after_files=2)],
                         progress=lambda m: print(f"[demo] {m}"))
    result = driver.run(tables)
    elapsed = time.monotonic() - started
    store = open_store(dest)
    report = load_success(store, store.join(store.strip(dest), SUCCESS_FILE))
    path = store.strip(dest)
    data = ds.dataset(path, format="parquet", partitioning="hive",
                      filesystem=None, exclude_invalid_files=True).to_table()
    data = data.set_column(data.schema.get_field_index("date"), "date", data["date"].cast("string"))
    found = checksum(data)
    ok = found == expected and report.success
    print()
    print(f"committer:      {result.committer} ({result.selection})")
    print(f"destination:    {dest}")
    print(f"written:        {result.files} files, {result.bytes:,} bytes, {result.rows:,} rows "
          f"in {elapsed:.2f}s")
    print(f"task attempts:  {sum(result.attempts.values())} for {len(result.attempts)} tasks; "
          f"failures: {'; '.join(result.failures) or 'none'}")
    print(f"_SUCCESS:       success={report.success} committer={report.committer} "
          f"files={report.metrics.get('files.committed')} job={report.jobId}")
    print(f"verification:   expected rows={expected[0]:,} checksum={expected[1]}; "
          f"read back rows={found[0]:,} checksum={found[1]} -> {'OK' if ok else 'MISMATCH'}")
    if workdir and not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)
    elif workdir:
        print(f"kept output in {workdir}")
    return 0 if ok else 1
