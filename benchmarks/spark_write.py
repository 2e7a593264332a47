"""End-to-end write cost of a safe commit under real request latency, with and without Spark.

Three ways to write the same rows to S3, in the same run, interleaved, median of ``--repeat``:

* ``outcommit magic``: the safe write (Spark: ``df.write.format("outcommit")``; without
  Spark: the local engine ``LocalDriver``), tasks, then job commit;
* ``direct``: the same tasks writing the same files with pyarrow + s3fs straight to their
  final paths (the unsafe baseline: a failed or duplicated attempt leaves partial or doubled
  output);
* ``write_dataset``: each task calls ``pyarrow.dataset.write_dataset`` (Arrow's C++ S3
  client, which writes a task's files in parallel), also unsafe.

Both layouts: one file per task, and Hive-partitioned by ``date``. Without Spark, the tasks
run on a pool of ``--workers`` threads (Spark: ``local[2]``).

Every S3 client goes through a loopback latency proxy (``outcommit_devtools.faultproxy``,
in its own process) that holds *every* request ``--delay-ms`` before forwarding it to the
moto server (another process), so a write's wall time reflects its requests' round trips,
not only the emulator's CPU. Requests are counted at the server, whichever process sent
them. Targets: safe <= 1.10x direct and <= 1.25x write_dataset.

    python benchmarks/spark_write.py [--rows 200000] [--tasks 8] [--repeat 3] [--delay-ms 25]
                                     [--layouts task,date] [--engines spark,local]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

TARGET_DIRECT = 1.10
TARGET_DATASET = 1.25
BUCKET = "bench"
COUNTS_PATH = "/__bench_counts"


# -- the moto server, in its own process, counting requests ---------------------------------------
def kind(environ: dict[str, Any]) -> str:
    method, query = environ["REQUEST_METHOD"], environ.get("QUERY_STRING", "")
    keys = {part.split("=", 1)[0] for part in query.split("&") if part}
    if method == "PUT":
        return "UploadPart" if "partNumber" in keys else "PutObject"
    if method == "POST":
        if "uploads" in keys:
            return "CreateMultipartUpload"
        return "CompleteMultipartUpload" if "uploadId" in keys else "DeleteObjects"
    if method == "GET":
        if "uploads" in keys:
            return "ListMultipartUploads"
        path_parts = environ.get("PATH_INFO", "/").strip("/").split("/")
        return "List" if len(path_parts) == 1 or "list-type" in keys else "GetObject"
    if method == "DELETE":
        return "AbortMultipartUpload" if "uploadId" in keys else "DeleteObject"
    return {"HEAD": "HeadObject"}.get(method, method)


def serve_moto(port: int) -> None:
    """Child process: moto on ``port``; ``GET /__bench_counts`` answers and resets the counts
    and the server's CPU seconds per request kind (the emulator's work, which no proxy delay hides)."""
    import logging

    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    counts: Counter[str] = Counter()
    seconds: Counter[str] = Counter()
    wsgi = server._server  # werkzeug's server
    app = wsgi.app

    def counted(environ: dict[str, Any], start_response: Any) -> Any:
        if environ.get("PATH_INFO") == COUNTS_PATH:
            body = json.dumps({"counts": dict(counts), "seconds": dict(seconds)}).encode()
            counts.clear()
            seconds.clear()
            start_response("200 OK", [("Content-Type", "application/json"),
                                      ("Content-Length", str(len(body)))])
            return [body]
        what = kind(environ)
        counts[what] += 1
        started = time.thread_time()  # CPU of this request's thread: GIL waits not counted
        answer = app(environ, start_response)
        try:
            return list(answer)  # moto's work, body included
        finally:
            getattr(answer, "close", lambda: None)()
            seconds[what] += time.thread_time() - started

    wsgi.app = counted
    print("ready", flush=True)
    time.sleep(10**7)


def wait_port(port: int, process: subprocess.Popen[Any]) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline or process.poll() is not None:
                raise RuntimeError(f"nothing listens on {port}") from None
            time.sleep(0.1)


@contextlib.contextmanager
def moto_behind_proxy(delay_ms: float, delay_mode: str = "added",
                      trace: bool = False) -> Iterator[tuple[str, str, str]]:
    """A counting moto server and a latency proxy in front of it, each in its own process,
    with the benchmark bucket: yields (moto URL, proxy URL, the proxy's description line).
    ``delay_mode``/``trace``: the proxy's (``outcommit_devtools.faultproxy``)."""
    from outcommit_s3.embedded import EmbeddedS3, free_port

    moto_port = free_port()
    moto = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--serve-moto", str(moto_port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    proxy = None
    try:
        wait_port(moto_port, moto)
        moto_url = f"http://127.0.0.1:{moto_port}"
        proxy_port = free_port()
        proxy = subprocess.Popen([sys.executable, "-m", "outcommit_devtools.faultproxy", "--upstream",
                                  moto_url, "--delay-ms", str(delay_ms), "--port", str(proxy_port),
                                  "--delay-mode", delay_mode, *(["--trace"] if trace else [])],
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        assert proxy.stdout is not None
        proxy_line = proxy.stdout.readline().strip()
        wait_port(proxy_port, proxy)
        EmbeddedS3(endpoint_url=moto_url, server=None).create_bucket(BUCKET)
        yield moto_url, f"http://127.0.0.1:{proxy_port}", proxy_line
    finally:
        for process in (proxy, moto):
            if process is not None:
                process.kill()
                process.wait()


def take_counts(moto_url: str) -> tuple[Counter[str], Counter[str]]:
    """Requests by kind since the last call, and the server's CPU seconds on each kind."""
    with urllib.request.urlopen(moto_url + COUNTS_PATH) as answer:
        taken = json.loads(answer.read())
    return Counter(taken["counts"]), Counter(taken["seconds"])


# -- the three writers -----------------------------------------------------------------------------
def s3fs_of(endpoint: str, key: str, secret: str) -> Any:
    import s3fs

    return s3fs.S3FileSystem(key=key, secret=secret, endpoint_url=endpoint)


def arrow_s3_of(endpoint: str, key: str, secret: str) -> Any:
    from pyarrow import fs

    host = endpoint.removeprefix("http://")
    return fs.S3FileSystem(access_key=key, secret_key=secret, endpoint_override=host, scheme="http",
                           region="us-east-1", allow_bucket_creation=False)


def direct_task(fs: Any, base: str, table: Any, index: int, partition_by: list[str]) -> int:
    from outcommit.engine.writer import write_table

    return len(write_table(fs, base, table, task_index=index, job_id="direct", attempt=0,
                           partition_by=partition_by))


def dataset_task(fs: Any, base: str, table: Any, index: int, partition_by: list[str]) -> int:
    import pyarrow.dataset as ds

    written: list[str] = []
    ds.write_dataset(table, base, format="parquet", filesystem=fs,
                     partitioning=partition_by or None, partitioning_flavor="hive" if partition_by else None,
                     basename_template=f"part-{index:05d}-{{i}}.parquet",
                     existing_data_behavior="overwrite_or_ignore", create_dir=False,
                     file_visitor=lambda f: written.append(f.path))
    return len(written)


def spark_task_writer(kind_: str, endpoint: str, key: str, secret: str, base: str,
                      partition_by: list[str]) -> Callable[[Any], Any]:
    """mapInArrow function: each Spark task writes its rows itself (direct or write_dataset)."""

    def write(batches: Any) -> Any:
        import pyarrow as pa
        from pyspark import TaskContext

        index = TaskContext.get().partitionId()
        table = pa.Table.from_batches(list(batches))
        if kind_ == "direct":
            files = direct_task(s3fs_of(endpoint, key, secret), base, table, index, partition_by)
        else:
            files = dataset_task(arrow_s3_of(endpoint, key, secret), base, table, index, partition_by)
        yield pa.RecordBatch.from_pydict({"files": [files]})

    return write


def tree(store: Any, url: str) -> tuple[int, int]:
    root = store.strip(url)
    files = [f for f in store.list_files(root)
             if not any(p.startswith(("_", ".")) for p in f.path[len(root) + 1:].split("/"))]
    return len(files), sum(f.size for f in files)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--tasks", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--delay-ms", type=float, default=25.0, help="latency added to every S3 request")
    parser.add_argument("--layouts", default="task,date",
                        help="task: one file per task; date: Hive-partitioned by date")
    parser.add_argument("--engines", default="spark,local", help="spark (local[2]) and/or local (no Spark)")
    parser.add_argument("--workers", type=int, default=2, help="task threads without Spark")
    parser.add_argument("--serve-moto", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_moto:
        serve_moto(args.serve_moto)
        return 0

    import outcommit
    from outcommit import open_store
    from outcommit.engine.local import LocalDriver
    from outcommit_devtools.demo import generate_local
    from outcommit_s3.embedded import DUMMY_KEY, DUMMY_SECRET, EmbeddedS3

    servers = contextlib.ExitStack()
    spark = None
    try:
        moto_url, endpoint, proxy_line = servers.enter_context(moto_behind_proxy(args.delay_ms))
        s3 = EmbeddedS3(endpoint_url=endpoint, server=None)
        options = dict(s3.config)
        take_counts(moto_url)

        engines = [e for e in args.engines.split(",") if e]
        layouts = [x for x in args.layouts.split(",") if x]
        df = None
        if "spark" in engines:
            os.environ["PYSPARK_PYTHON"] = sys.executable
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
            from pyspark.sql import SparkSession

            import outcommit.spark
            from outcommit_devtools.demo import generate_spark

            spark = (SparkSession.builder.master("local[2]").appName("outcommit-bench")
                     .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
                     .config("spark.driver.host", "127.0.0.1").getOrCreate())
            spark.sparkContext.setLogLevel("ERROR")
            outcommit.spark.register(spark)
            df = generate_spark(spark, args.rows, args.tasks).cache()
            df.count()
        tables = generate_local(args.rows, args.tasks) if "local" in engines else []

        def runs_for(engine: str, partition_by: list[str]) -> dict[str, Callable[[str], Any]]:
            layout = {"partitionBy": ",".join(partition_by)} if partition_by else {}
            if engine == "spark":
                assert df is not None

                def safe(dest: str) -> None:
                    (df.write.format("outcommit").mode("overwrite").option("committer", "magic")
                     .options(**layout, **options).save(dest))

                def unsafe(which: str) -> Callable[[str], Any]:
                    def run(dest: str) -> None:
                        fn = spark_task_writer(which, endpoint, DUMMY_KEY, DUMMY_SECRET,
                                               dest.removeprefix("s3://"), partition_by)
                        df.mapInArrow(fn, "files long").collect()
                    return run

                return {"outcommit magic": safe, "direct pyarrow+s3fs": unsafe("direct"),
                        "pyarrow write_dataset": unsafe("dataset")}

            def local_safe(dest: str) -> None:
                LocalDriver(dest, committer="magic", config=options, workers=args.workers,
                            partition_by=partition_by).run(tables)

            def local_unsafe(task: Callable[..., int], fs_of: Callable[..., Any]) -> Callable[[str], Any]:
                def run(dest: str) -> None:
                    base = dest.removeprefix("s3://")
                    with ThreadPoolExecutor(args.workers) as pool:
                        list(pool.map(lambda item: task(fs_of(endpoint, DUMMY_KEY, DUMMY_SECRET), base,
                                                        item[1], item[0], partition_by),
                                      enumerate(tables)))
                return run

            return {"outcommit magic": local_safe, "direct pyarrow+s3fs": local_unsafe(direct_task, s3fs_of),
                    "pyarrow write_dataset": local_unsafe(dataset_task, arrow_s3_of)}

        print(f"write benchmark: {args.rows:,} rows in {args.tasks} tasks, Parquet; "
              f"{proxy_line}; moto server (own process) at {moto_url}; median of {args.repeat} "
              f"interleaved rounds after one warm-up", flush=True)
        summary = []
        for engine in engines:
            for layout_name in layouts:
                partition_by = ["date"] if layout_name == "date" else []
                runs = runs_for(engine, partition_by)
                where = "Spark local[2]" if engine == "spark" else f"no Spark, {args.workers} threads"
                label = f"{where}, {'partitioned by date' if partition_by else 'one file per task'}"
                for run in runs.values():  # warm-up: workers, connections, imports
                    run(f"s3://{BUCKET}/warmup-{engine}-{layout_name}-{uuid.uuid4().hex[:6]}")
                take_counts(moto_url)
                times: dict[str, list[float]] = {name: [] for name in runs}
                counted: dict[str, Counter[str]] = {}
                server_s: dict[str, Counter[str]] = {}
                last: dict[str, str] = {}
                for _ in range(args.repeat):
                    for name, run in runs.items():
                        dest = f"s3://{BUCKET}/{engine}-{layout_name}-{name.split()[-1]}-{uuid.uuid4().hex[:6]}"
                        started = time.perf_counter()
                        run(dest)
                        times[name].append(time.perf_counter() - started)
                        counted[name], server_s[name] = take_counts(moto_url)
                        last[name] = dest
                medians = {name: statistics.median(v) for name, v in times.items()}
                print(f"\n{label}:")
                for name, seconds in medians.items():
                    store = open_store(last[name], options)
                    files, size = tree(store, last[name])
                    total = sum(counted[name].values())
                    detail = ", ".join(f"{k} {v}" for k, v in counted[name].most_common())
                    runs_s = " ".join(f"{t:.2f}" for t in times[name])
                    print(f"  {name:24s} median {seconds:6.2f} s  (runs {runs_s})  {files:3d} files "
                          f"{size:>11,d} bytes  {total:4d} requests "
                          f"({total / max(files, 1):.1f}/file): {detail}")
                    busiest = ", ".join(f"{k} {v:.2f}" for k, v in server_s[name].most_common(3))
                    print(f"  {'':24s} moto's CPU in its requests: "
                          f"{sum(server_s[name].values()):.2f} s ({busiest})")
                success = json.loads(open_store(last["outcommit magic"], options).read_bytes(
                    f"{last['outcommit magic'].removeprefix('s3://')}/_SUCCESS"))
                print(f"  outcommit job commit (last run, its _SUCCESS): "
                      f"{success['metrics'].get('commit.duration.ms')} ms")
                safe = medians["outcommit magic"]
                vs_direct = safe / medians["direct pyarrow+s3fs"]
                vs_dataset = safe / medians["pyarrow write_dataset"]
                gap = safe - medians["direct pyarrow+s3fs"]
                # The safe write's extra cost is a number of round trips, not a factor of the data.
                print(f"  safe - direct:         {gap:+.2f} s" + (
                    f" = {gap * 1000 / args.delay_ms:.0f} round trips of {args.delay_ms:g} ms"
                    if args.delay_ms > 0 else ""))
                print(f"  safe / direct:         {vs_direct:.3f}x (target <= {TARGET_DIRECT}: "
                      f"{'met' if vs_direct <= TARGET_DIRECT else 'NOT met'})")
                print(f"  safe / write_dataset:  {vs_dataset:.3f}x (target <= {TARGET_DATASET}: "
                      f"{'met' if vs_dataset <= TARGET_DATASET else 'NOT met'})", flush=True)
                summary.append((label, vs_direct, vs_dataset, gap))
        print("\nsummary (safe/direct, safe/write_dataset, safe - direct):")
        for label, vs_direct, vs_dataset, gap in summary:
            print(f"  {label:45s} {vs_direct:.3f}x  {vs_dataset:.3f}x  {gap:+.2f} s")
        return 0
    finally:
        if spark is not None:
            spark.stop()
        servers.close()


if __name__ == "__main__":
    sys.exit(main())
