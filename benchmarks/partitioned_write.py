"""The partitioned writer alone, with no store and no commit: outcommit's StreamingWriter
against ``pyarrow.dataset.write_dataset``, both writing Hive-partitioned Parquet to a local
temporary directory.

``python benchmarks/partitioned_write.py --rows 10000000``

The tasks' tables (the demo events, 7 dates) are written by ``--workers`` threads, one
table per task, as the local engine runs them; each path runs ``--repeat`` times,
interleaved, after a warm-up, and the median is printed. Then the split of every batch
by partition (``split_by_partition``, one thread) is timed on its own, for the batch
sizes the engines hand over (Spark's Arrow batches hold 10,000 rows; the local engine cuts
tables into 65,536-row batches). What it shows: the writer's own cost, which the
end-to-end benchmark (``spark_write.py``) cannot separate from the store's.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--tasks", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2, help="task threads")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)

    import fsspec
    import pyarrow.dataset as ds
    from pyarrow import fs as pafs

    from outcommit.engine.writer import split_by_partition, write_table
    from outcommit_devtools.demo import generate_local

    tables = generate_local(args.rows, args.tasks)
    local = fsspec.filesystem("file", auto_mkdir=True)

    def ours(base: str, index: int, table: Any) -> None:
        write_table(local, base, table, task_index=index, job_id="bench", attempt=0,
                    partition_by=["date"])

    def arrow(base: str, index: int, table: Any) -> None:
        ds.write_dataset(table, base, format="parquet", filesystem=pafs.LocalFileSystem(),
                         partitioning=["date"], partitioning_flavor="hive",
                         basename_template=f"part-{index:05d}-{{i}}.parquet",
                         existing_data_behavior="overwrite_or_ignore")

    paths: dict[str, Callable[[str, int, Any], None]] = {
        "outcommit StreamingWriter": ours, "pyarrow write_dataset": arrow}
    times: dict[str, list[float]] = {name: [] for name in paths}
    sizes: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="outcommit-bench-") as scratch:
        def run(name: str, write: Callable[[str, int, Any], None], round_: str) -> float:
            base = str(Path(scratch) / f"{round_}-{name.split()[-1]}")
            started = time.perf_counter()
            with ThreadPoolExecutor(args.workers) as pool:
                list(pool.map(lambda item: write(base, *item), enumerate(tables)))
            elapsed = time.perf_counter() - started
            sizes[name] = sum(p.stat().st_size for p in Path(base).rglob("*.parquet"))
            return elapsed

        for name, write in paths.items():
            run(name, write, "warmup")
        for round_ in range(args.repeat):
            for name, write in paths.items():
                times[name].append(run(name, write, f"r{round_}"))

    print(f"partitioned write: {args.rows:,} rows in {args.tasks} tasks by date (7 partitions), "
          f"{args.workers} task threads, Parquet to a local directory; median of {args.repeat} "
          "interleaved rounds after one warm-up")
    medians = {name: statistics.median(v) for name, v in times.items()}
    for name, seconds in medians.items():
        runs = " ".join(f"{t:.2f}" for t in times[name])
        print(f"  {name:26s} median {seconds:6.2f} s  (runs {runs})  {sizes[name]:>12,d} bytes")
    print(f"  StreamingWriter / write_dataset: "
          f"{medians['outcommit StreamingWriter'] / medians['pyarrow write_dataset']:.3f}x")
    for rows in (10_000, 65_536):
        batches = [b for t in tables for b in t.to_batches(max_chunksize=rows)]
        started = time.process_time()
        for batch in batches:
            split_by_partition(batch, ["date"])
        print(f"  split by partition alone, {rows:,}-row batches: "
              f"{time.process_time() - started:.2f} s of CPU for {len(batches)} batches")
    return 0


if __name__ == "__main__":
    sys.exit(main())
