"""outcommit against the peers a Python user would pick instead (issue 30), side by side.

    python benchmarks/peers.py [--jobs whole,tasks,thousand] [--rounds 3] [--delay-ms 30]
                               [--systems polars,deltalake,dataset,local,api,spark] [--ci]

The same rows (160,000, a ``day`` column; ``--ci``: 1,600) written to one moto server (its
own process) through the project's latency proxy (``outcommit_devtools.faultproxy``, its
own process, ``--delay-ms`` added to every request), by:

* ``polars``: ``DataFrame.write_parquet(url, partition_by="day")`` (Rust object_store; unsafe:
  files land in place one by one);
* ``deltalake``: ``write_deltalake(url, table, partition_by=["day"])`` with its log committed
  by a conditional PUT (``conditional_put=etag``): the safe peer;
* ``dataset``: ``pyarrow.dataset.write_dataset`` (Arrow's C++ S3 client; unsafe), one call for
  the whole table, or one per task, one after another;
* ``local``: outcommit's local engine, ``LocalDriver(url, committer="magic", workers=2)``;
* ``api``: the committer API as the README's ten lines use it, tasks one after another
  (each task's rows written by ``outcommit.engine.writer.write_table``);
* ``spark``: the PySpark data source, ``df.write.format("outcommit")`` on ``local[2]``.

Jobs: ``whole`` (one table, 7 days: 7 files), ``tasks`` (8 tasks x 7 days: 56 files),
``thousand`` (8 tasks x 125 days: 1,000 files). ``polars`` and ``deltalake`` take the
whole table in one call, so they run in ``whole`` only. Rounds are interleaved (round
1: every system, then round 2...) after one warm-up each, and each figure is a median.
Requests are counted at the server (whatever process sent them), by operation, exactly;
every output is read back (``deltalake`` through its log, outcommit's through
``outcommit.read``) and its rows and the sum of their ids checked against the input.
``CPU s`` is this process's CPU during the write (all its threads; Spark's JVM and Python
workers are other processes: not counted). Wall times on a shared machine are noisy;
the request counts are not.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from spark_write import BUCKET, arrow_s3_of, dataset_task, moto_behind_proxy, take_counts

ROWS = 160_000
CI_ROWS = 1_600
SYSTEMS = ("polars", "deltalake", "dataset", "local", "api", "spark")
WHOLE_ONLY = ("polars", "deltalake")
LABELS = {"polars": 'Polars write_parquet(partition_by="day")',
          "deltalake": 'deltalake write_deltalake(partition_by=["day"])',
          "dataset": "pyarrow write_dataset",
          "local": 'outcommit LocalDriver(committer="magic")',
          "api": "outcommit committer API, tasks in turn",
          "spark": 'outcommit Spark data source (local[2])'}


@dataclass(frozen=True)
class Job:
    name: str
    tasks: int
    days: int

    @property
    def files(self) -> int:
        return self.tasks * self.days

    def describe(self) -> str:
        return (f"{self.name}: {self.tasks} task{'s' if self.tasks > 1 else ''} x {self.days} days, "
                f"{self.files:,} files")


JOBS = {"whole": Job("whole", 1, 7), "tasks": Job("tasks", 8, 7), "thousand": Job("thousand", 8, 125)}
CI_JOBS = {"whole": Job("whole", 1, 3), "tasks": Job("tasks", 2, 3), "thousand": Job("thousand", 2, 10)}


def make_tables(rows: int, tasks: int, days: int) -> list[Any]:
    """``rows`` rows in ``tasks`` tables, every table holding rows of every day."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    start_day = np.datetime64("2026-01-01")
    dates = pa.array([str(start_day + d) for d in range(days)])
    per_task = -(-rows // tasks)
    tables = []
    for task in range(tasks):
        ids = np.arange(task * per_task, min(rows, (task + 1) * per_task), dtype=np.int64)
        tables.append(pa.table({"id": ids, "user": ids * 7919 % 100_003,
                                "amount": (ids * 31 % 10_000).astype(np.float64) / 100,
                                "kind": pc.cast(pa.array(ids % 5), pa.string()),
                                "day": dates.take(pa.array(ids % days))}))
    return tables


@dataclass
class Context:
    """Everything the writers need: where the server is, the data, a Spark session if any."""

    endpoint: str
    config: dict[str, str]
    tables: list[Any]
    job: Job
    workers: int
    spark_df: Any = None
    extra: dict[str, Any] = field(default_factory=dict)

    def url(self, key: str) -> str:
        return f"s3://{BUCKET}/{key}"


def storage_options_delta(endpoint: str) -> dict[str, str]:
    from outcommit_s3.embedded import DUMMY_KEY, DUMMY_SECRET

    return {"AWS_ENDPOINT_URL": endpoint, "AWS_ALLOW_HTTP": "true", "AWS_ACCESS_KEY_ID": DUMMY_KEY,
            "AWS_SECRET_ACCESS_KEY": DUMMY_SECRET, "AWS_REGION": "us-east-1", "conditional_put": "etag"}


def storage_options_polars(endpoint: str) -> dict[str, str]:
    from outcommit_s3.embedded import DUMMY_KEY, DUMMY_SECRET

    return {"aws_endpoint_url": endpoint, "aws_allow_http": "true", "aws_access_key_id": DUMMY_KEY,
            "aws_secret_access_key": DUMMY_SECRET, "aws_region": "us-east-1"}


# -- the writers ------------------------------------------------------------------------------------
def write_polars(ctx: Context, key: str) -> None:
    import polars as pl
    import pyarrow as pa

    frame = pl.from_arrow(pa.concat_tables(ctx.tables))
    assert isinstance(frame, pl.DataFrame)
    frame.write_parquet(ctx.url(key), partition_by="day",
                        storage_options=storage_options_polars(ctx.endpoint))


def write_delta(ctx: Context, key: str) -> None:
    import pyarrow as pa
    from deltalake import write_deltalake

    write_deltalake(ctx.url(key), pa.concat_tables(ctx.tables), partition_by=["day"],
                    storage_options=storage_options_delta(ctx.endpoint))


def write_dataset(ctx: Context, key: str) -> None:
    """One call for one table; one call per task, one after another, for several."""
    from outcommit_s3.embedded import DUMMY_KEY, DUMMY_SECRET

    fs = arrow_s3_of(ctx.endpoint, DUMMY_KEY, DUMMY_SECRET)
    for index, table in enumerate(ctx.tables):
        dataset_task(fs, f"{BUCKET}/{key}", table, index, ["day"])


def write_local(ctx: Context, key: str) -> None:
    from outcommit.engine.local import LocalDriver

    LocalDriver(ctx.url(key), committer="magic", config=ctx.config, workers=ctx.workers,
                partition_by=["day"]).run(ctx.tables)


def write_api(ctx: Context, key: str, mark: Callable[[str], None] = lambda _: None,
              committer_name: str = "magic") -> None:
    """The README's ten lines, tasks one after another; ``mark`` is called between phases."""
    import outcommit
    from outcommit.engine.writer import write_table

    dest = ctx.url(key)
    mark("setup")
    committer = outcommit.create_committer(dest, ctx.config, committer_name)
    job = outcommit.JobContext(dest, config=committer.config)
    committer.setup_job(job)
    messages = []
    for index, table in enumerate(ctx.tables):
        task = job.task_attempt(index=index)
        mark("task setup")
        committer.setup_task(task)
        mark("writes")
        write_table(committer.filesystem(task), committer.work_path(task), table, task_index=index,
                    job_id=job.job_id, attempt=0, partition_by=["day"])
        mark("task commit")
        messages.append(committer.commit_task(task))
    mark("job commit")
    committer.commit_job(job, messages)


def write_spark(ctx: Context, key: str, committer_name: str = "magic") -> None:
    (ctx.spark_df.write.format("outcommit").mode("overwrite").option("committer", committer_name)
     .option("partitionBy", "day").options(**ctx.config).save(ctx.url(key)))


WRITERS: dict[str, Callable[[Context, str], None]] = {
    "polars": write_polars, "deltalake": write_delta, "dataset": write_dataset, "local": write_local,
    "api": write_api, "spark": write_spark}


# -- reading back ---------------------------------------------------------------------------------------
def read_back(system: str, ctx: Context, key: str) -> tuple[int, int, int]:
    """(files, rows, sum of ids) of what ``system`` committed under ``key``."""
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    import outcommit.read
    from outcommit import open_store

    url = ctx.url(key)
    store = open_store(url, ctx.config)
    if system == "deltalake":
        from deltalake import DeltaTable

        table = DeltaTable(url, storage_options=storage_options_delta(ctx.endpoint))
        paths = [store.strip(uri) for uri in table.file_uris()]  # exactly the log's files
    elif system in ("local", "api", "spark"):
        paths = [store.strip(u) for u in outcommit.read.committed_files(url, ctx.config)]
    else:
        root = store.strip(url)
        paths = [f.path for f in store.list_files(root)
                 if not any(p.startswith(("_", ".")) for p in f.path[len(root) + 1:].split("/"))]
    ids = ds.dataset(paths, filesystem=store.fs, format="parquet").to_table(columns=["id"]).column("id")
    return len(paths), len(ids), int(pc.sum(ids).as_py() or 0)


# -- the run ----------------------------------------------------------------------------------------------
@dataclass
class Row:
    system: str
    times: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    requests: Counter[str] = field(default_factory=Counter)
    checked: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def total(self) -> int:
        return sum(self.requests.values())


def systems_for(job: Job, wanted: list[str]) -> list[str]:
    return [s for s in wanted if job.tasks == 1 or s not in WHOLE_ONLY]


@contextlib.contextmanager
def spark_session() -> Iterator[Any]:
    import os

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    import outcommit.spark

    spark = (SparkSession.builder.master("local[2]").appName("outcommit-peers")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.host", "127.0.0.1").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    outcommit.spark.register(spark)
    try:
        yield spark
    finally:
        spark.stop()


def spark_frame(spark: Any, tables: list[Any]) -> Any:
    """The tables as a DataFrame of ``len(tables)`` partitions, cached (its writes only are timed)."""
    import pyarrow as pa

    frame = spark.createDataFrame(pa.concat_tables(tables).to_pandas())
    frame = frame.coalesce(1) if len(tables) == 1 else frame.repartition(len(tables))
    frame = frame.cache()
    frame.count()
    return frame


def run_job(job: Job, ctx: Context, systems: list[str], rounds: int, moto_url: str,
            expected: tuple[int, int]) -> list[Row]:
    rows = {s: Row(s) for s in systems}
    for system in systems:  # warm-up: imports, sessions, the JVM's first job
        WRITERS[system](ctx, f"warmup-{job.name}-{system}-{uuid.uuid4().hex[:6]}")
    take_counts(moto_url)
    last: dict[str, str] = {}
    for _ in range(rounds):
        for system in systems:
            key = f"{job.name}-{system}-{uuid.uuid4().hex[:8]}"
            cpu, started = time.process_time(), time.perf_counter()
            WRITERS[system](ctx, key)
            rows[system].times.append(time.perf_counter() - started)
            rows[system].cpu.append(time.process_time() - cpu)
            counted, _ = take_counts(moto_url)
            if rows[system].requests and counted != rows[system].requests:
                changed = {k: f"{rows[system].requests.get(k, 0)} -> {counted.get(k, 0)}"
                           for k in set(counted) | set(rows[system].requests)
                           if counted.get(k, 0) != rows[system].requests.get(k, 0)}
                rows[system].notes.append(f"{system}'s requests changed between rounds: {changed}")
            rows[system].requests = counted
            last[system] = key
    for system in systems:
        files, count, id_sum = read_back(system, ctx, last[system])
        ok = (count, id_sum) == expected
        rows[system].checked = f"{files} files, {count:,} rows {'ok' if ok else 'WRONG'}"
        if not ok:
            raise SystemExit(f"{system} wrote {count} rows (id sum {id_sum}), expected {expected}")
    take_counts(moto_url)  # the reads are not the writers'
    return list(rows.values())


def print_job(job: Job, rows: list[Row], delay_ms: float) -> None:
    print(f"\n{job.describe()}:")
    print(f"  {'system':48s} {'median s':>9s} {'CPU s':>6s} {'requests':>9s}  {'read back':24s}  "
          "requests by operation (runs)")
    for row in rows:
        detail = ", ".join(f"{k} {v}" for k, v in row.requests.most_common())
        runs = " ".join(f"{t:.2f}" for t in row.times)
        cpu = "n/a" if row.system == "spark" else f"{statistics.median(row.cpu):.2f}"
        label = LABELS[row.system] + (" per task, in turn" if row.system == "dataset" and job.tasks > 1
                                      else "")
        print(f"  {label:48s} {row.median:9.2f} {cpu:>6s} {row.total:9d}  {row.checked:24s}  "
              f"{detail} (runs {runs})")
    for row in rows:
        for note in row.notes:
            print(f"  note: {note}")
    by = {r.system: r for r in rows}

    def ratio(a: str, b: str, target: float) -> None:
        if a in by and b in by:
            value = by[a].median / by[b].median
            verdict = "met" if value <= target else "NOT met"
            print(f"  {a} / {b}: {value:.2f}x (target <= {target}: {verdict})")

    if job.name == "whole":
        ratio("local", "deltalake", 0.5)
    elif job.name == "tasks":
        ratio("local", "dataset", 1.0)
        ratio("api", "dataset", 1.25)
    else:
        ratio("local", "dataset", 1.1)
        ratio("api", "dataset", 1.1)
    if delay_ms > 0:
        fastest = min(rows, key=lambda r: r.median)
        print(f"  (at {delay_ms:g} ms per request the fastest, {fastest.system}, took "
              f"{fastest.median * 1000 / delay_ms:.1f} request latencies)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", default="whole,tasks,thousand", help=f"of {', '.join(JOBS)}")
    parser.add_argument("--systems", default=",".join(SYSTEMS), help=f"of {', '.join(SYSTEMS)}")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (median)")
    parser.add_argument("--delay-ms", type=float, default=30.0, help="latency added to every request")
    parser.add_argument("--workers", type=int, default=2, help="LocalDriver's workers")
    parser.add_argument("--rows", type=int, default=0, help=f"rows (default {ROWS:,}; --ci: {CI_ROWS:,})")
    parser.add_argument("--ci", action="store_true",
                        help="tiny sizes: whole 1x3, tasks 2x3, thousand 2x10 files")
    args = parser.parse_args(argv)
    jobs_table = CI_JOBS if args.ci else JOBS
    unknown = [j for j in args.jobs.split(",") if j not in jobs_table] + \
        [s for s in args.systems.split(",") if s not in SYSTEMS]
    if unknown:
        parser.error(f"unknown job or system {unknown[0]!r}: jobs {', '.join(JOBS)}; "
                     f"systems {', '.join(SYSTEMS)}")
    rows_total = args.rows or (CI_ROWS if args.ci else ROWS)
    wanted = args.systems.split(",")
    with contextlib.ExitStack() as stack:
        moto_url, endpoint, proxy_line = stack.enter_context(moto_behind_proxy(args.delay_ms))
        from outcommit_s3.embedded import EmbeddedS3

        config = dict(EmbeddedS3(endpoint_url=endpoint, server=None).config)
        spark = stack.enter_context(spark_session()) if "spark" in wanted else None
        print(f"peers: {rows_total:,} rows; {proxy_line}; moto (own process) at {moto_url}; "
              f"median of {args.rounds} interleaved rounds after a warm-up; requests counted at the server",
              flush=True)
        for name in args.jobs.split(","):
            job = jobs_table[name]
            tables = make_tables(rows_total, job.tasks, job.days)
            import pyarrow.compute as pc

            expected = (rows_total, sum(int(pc.sum(t.column("id")).as_py()) for t in tables))
            ctx = Context(endpoint, config, tables, job, args.workers,
                          spark_df=spark_frame(spark, tables) if spark is not None else None)
            rows = run_job(job, ctx, systems_for(job, wanted), args.rounds, moto_url, expected)
            print_job(job, rows, args.delay_ms)
            sys.stdout.flush()
            if ctx.spark_df is not None:
                ctx.spark_df.unpersist()
    return 0


if __name__ == "__main__":
    sys.exit(main())
