"""Peak memory of the Python worker of one Spark task writing one big partition.

    python benchmarks/spark_task_memory.py [--rows 1000000,10000000] [--pad 60]

Each size is written by ONE Spark task (one partition) with ``df.write.format("outcommit")``
to a local directory (the committer's default for ``file://``; the memory measured is the
writer's, whatever the store). The rows are the demo events plus a ``pad`` string column of
``--pad`` characters, so that 10M rows are more than 1 GB as Arrow. Printed beside each
partition's Arrow size: the peak RSS of the Python worker that ran the task, as the task
itself reports it (``ru_maxrss``, in ``_SUCCESS`` as ``spark.task.peak-rss.max``). Python
workers are not reused (``spark.python.worker.reuse=false``): each task's worker is a fresh
fork, so its peak is that task's. A write of 1,000 rows first gives the worker's floor.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="1000000,10000000", help="partition sizes, comma-separated")
    parser.add_argument("--pad", type=int, default=60, help="characters of the pad column")
    args = parser.parse_args(argv)

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    import outcommit.spark
    from outcommit_devtools.demo import generate_local, generate_spark

    spark = (SparkSession.builder.master("local[1]").appName("outcommit-task-memory")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.host", "127.0.0.1").config("spark.python.worker.reuse", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    outcommit.spark.register(spark)
    workdir = tempfile.mkdtemp(prefix="outcommit-task-memory-")
    pad = "x" * args.pad
    sample = generate_local(100_000, 1)[0]
    per_row = (sample.nbytes + 100_000 * (args.pad + 4)) / 100_000  # + the pad column (offsets)
    try:
        def write(rows: int) -> tuple[int, float, int]:
            dest = Path(workdir, f"rows-{rows}")
            started = time.perf_counter()
            (generate_spark(spark, rows, 1).withColumn("pad", F.lit(pad)).write.format("outcommit")
             .mode("overwrite").save(f"file://{dest}"))
            elapsed = time.perf_counter() - started
            metrics = json.loads((dest / "_SUCCESS").read_text())["metrics"]
            written = sum(f.stat().st_size for f in dest.rglob("*.parquet"))
            return int(metrics["spark.task.peak-rss.max"]), elapsed, written

        print(f"one Spark task per write (local[1], Python workers not reused), Parquet to file://; "
              f"Arrow size = rows x {per_row:.1f} bytes (demo events {sample.nbytes / 100_000:.1f} "
              f"+ pad {args.pad + 4})")
        floor, _, _ = write(1000)
        print(f"  {1000:>11,d} rows  Arrow {1000 * per_row / 1e6:8.1f} MB  worker peak RSS "
              f"{floor / 2**20:7.1f} MB  (the floor: imports, Arrow, the writer)", flush=True)
        rows_out = []
        for rows in (int(r) for r in args.rows.split(",")):
            peak, elapsed, written = write(rows)
            arrow_mb = rows * per_row / 1e6
            rows_out.append((rows, arrow_mb, peak / 2**20))
            print(f"  {rows:>11,d} rows  Arrow {arrow_mb:8.1f} MB  worker peak RSS {peak / 2**20:7.1f} MB "
                  f"(+{(peak - floor) / 2**20:.1f} over the floor)  Parquet {written / 1e6:7.1f} MB  "
                  f"{elapsed:6.1f} s", flush=True)
        if len(rows_out) >= 2:
            small, big = rows_out[0], rows_out[-1]
            print(f"  Arrow size x{big[1] / small[1]:.1f}; worker peak RSS x{big[2] / small[2]:.2f} "
                  f"({small[2]:.1f} -> {big[2]:.1f} MB)")
        return 0
    finally:
        spark.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
