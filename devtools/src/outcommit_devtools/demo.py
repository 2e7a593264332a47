"""``outcommit demo``: write a generated event dataset through a committer, then verify it.

A command of the development tools (added to the CLI by their plugin, never by core).

Default: local PySpark writes >= 1M rows, partitioned by date, to an embedded S3 server
(moto on 127.0.0.1) through the ``magic`` committer, with one task's first attempt
failing mid-write (Spark retries it); then the output is read back and checked against
the input (row count and an order-independent checksum), and no pending upload may be left.
``--engine local`` runs the same job on the local engine, without Spark or Java.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from outcommit.install import install_command

DATES = [f"2026-11-{d:02d}" for d in range(1, 8)]
KINDS = ["view", "click", "purchase", "signup", "logout"]
COUNTRIES = ["DE", "FR", "US", "BR", "IN", "JP", "NG", "GB"]
# The demo's failure injection: this task's first attempt dies mid-write.
FAILING_TASK = 2
JAVA_HELP = ("PySpark needs Java 17 (or 11/21). Install it, e.g. on Debian/Ubuntu:\n"
             "    sudo apt-get install -y openjdk-17-jre-headless\n"
             "or point JAVA_HOME at an installed JDK/JRE (export JAVA_HOME=/usr/lib/jvm/...).\n"
             "To run the demo without Spark: outcommit demo --engine local --store file")


_NARRATION = sys.stdout  # stderr with --json: stdout carries the JSON document only


def say(message: str) -> None:
    print(f"[demo] {message}", file=_NARRATION, flush=True)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", choices=["file", "s3", "azure", "gcs"], default="s3",
                        help="where to write: an embedded server for s3/azure/gcs (default s3)")
    parser.add_argument("--committer", default=None,
                        help="committer name (default: the store's; magic on s3)")
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows to generate (default 1M)")
    parser.add_argument("--tasks", type=int, default=8, help="Spark partitions / tasks (default 8)")
    parser.add_argument("--engine", choices=["spark", "local"], default="spark",
                        help="spark (default) or the local engine (no Java needed)")
    parser.add_argument("--dest", default=None, help="destination URL (default: a fresh one)")
    parser.add_argument("--progress", choices=["auto", "on", "off"], default="auto",
                        help="live job-commit progress bar (tqdm, on stderr): auto = on a terminal")
    parser.add_argument("--json", action="store_true",
                        help="print the outcome as one JSON document on stdout (narration on stderr)")
    parser.add_argument("--keep", action="store_true",
                        help="keep the output (and the embedded server, until Ctrl-C) and print how "
                             "to reach it")


# -- checksums -----------------------------------------------------------------------
def _mix(values: Any) -> Any:
    """splitmix64's finaliser on a uint64 Arrow array (pyarrow's unchecked ops wrap)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    def u64(n: int) -> Any:
        return pa.scalar(n, pa.uint64())

    x = pc.bit_wise_xor(values, pc.shift_right(values, u64(30)))
    x = pc.multiply(x, u64(0xBF58476D1CE4E5B9))
    x = pc.bit_wise_xor(x, pc.shift_right(x, u64(27)))
    x = pc.multiply(x, u64(0x94D049BB133111EB))
    return pc.bit_wise_xor(x, pc.shift_right(x, u64(31)))


def _column_words(column: Any) -> Any:
    """One uint64 per row for any column type (strings through a hash of each distinct value)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    kind = column.type
    if pa.types.is_dictionary(kind):
        column = column.cast(kind.value_type)
        kind = column.type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_binary(kind):
        encoded = pc.dictionary_encode(column.fill_null("\x00null"))
        words = pa.array([int.from_bytes(hashlib.sha256(str(v).encode()).digest()[:8], "big")
                          for v in encoded.dictionary.to_pylist()] or [0], pa.uint64())
        return pc.take(words, encoded.indices)
    if pa.types.is_floating(kind):
        return column.cast(pa.float64()).fill_null(0.0).view(pa.uint64())
    if pa.types.is_date32(kind):
        column = column.cast(pa.int32())
    return column.cast(pa.int64()).fill_null(-(1 << 62)).view(pa.uint64())


def checksum(table: Any) -> tuple[int, str]:
    """Row count and an order-independent checksum: the wrapping sum of per-row hashes.

    A lost, duplicated or changed row changes it; the order of rows and files does not.
    Columns are taken by name, so a Hive partition column read back compares equal.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    if table.num_rows == 0:
        return 0, f"{0:016x}"
    rows = pa.repeat(pa.scalar(0, pa.uint64()), table.num_rows)
    for name in sorted(table.column_names):
        salt = pa.scalar(int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big"), pa.uint64())
        rows = _mix(pc.bit_wise_xor(rows, _mix(pc.add(_column_words(table[name]), salt))))
    return table.num_rows, f"{pc.sum(rows).as_py() % (1 << 64):016x}"


# -- data ----------------------------------------------------------------------------
def generate_local(rows: int, tasks: int) -> list[Any]:
    """The event table for the local engine, one Arrow table per task."""
    import numpy as np
    import pyarrow as pa

    per_task = -(-rows // tasks)
    tables = []
    for task in range(tasks):
        start, stop = task * per_task, min(rows, (task + 1) * per_task)
        ids = np.arange(start, stop, dtype=np.int64)   # numpy: pyarrow's remainder is newer than its floor
        tables.append(pa.table({
            "event_id": ids,
            "user_id": ids * 7919 % 100_003,
            "kind": pa.array(KINDS).take(ids % len(KINDS)),
            "country": pa.array(COUNTRIES).take(ids * 13 % len(COUNTRIES)),
            "amount_cents": ids * 31 % 10_000,
            "date": pa.array(DATES).take(ids % len(DATES)),
        }))
    return tables


def generate_spark(spark: Any, rows: int, tasks: int) -> Any:
    """The same events as Spark expressions over ``range``: no data passes through Python."""
    from pyspark.sql import functions as F

    def pick(values: list[str], index: Any) -> Any:
        return F.element_at(F.array(*[F.lit(v) for v in values]), (index + 1).cast("int"))

    event_id = F.col("id")
    return (spark.range(0, rows, 1, tasks)
            .select(event_id.alias("event_id"),
                    (event_id * 7919 % 100_003).alias("user_id"),
                    pick(KINDS, event_id % len(KINDS)).alias("kind"),
                    pick(COUNTRIES, event_id * 13 % len(COUNTRIES)).alias("country"),
                    (event_id * 31 % 10_000).alias("amount_cents"),
                    F.timestamp_seconds(F.lit(1_793_491_200) + event_id % 604_800).alias("ts"),
                    pick(DATES, event_id % len(DATES)).alias("date")))


# -- stores ----------------------------------------------------------------------------
@dataclass
class DemoStore:
    """Where the demo writes, and how to stop and reach it."""

    kind: str
    destination: str
    config: dict[str, str] = field(default_factory=dict)
    stop: Callable[[], None] = lambda: None
    reach: list[str] = field(default_factory=list)
    description: str = ""


def _embedded_server(kind: str) -> tuple[Any, str, dict[str, str], str]:
    """Start the embedded server of a store kind: (server, endpoint, config, container).

    The development tools know the plugins' launchers by name; core never does.
    """
    container = "outcommit-demo"
    try:
        if kind == "s3":
            from outcommit_s3.embedded import start_moto_server

            s3 = start_moto_server([container])
            return s3, s3.endpoint_url, s3.config, container
        if kind == "azure":
            from outcommit_azure.emulator import start_azurite

            azurite = start_azurite()
            azurite.create_container(container)
            return azurite, azurite.endpoint, azurite.config(), container
        from outcommit_gcs.emulator import start_gcs_emulator

        _quiet_hangups()
        gcs = start_gcs_emulator()
        gcs.create_bucket(container)
        return gcs, gcs.endpoint, gcs.config(), container
    except ImportError as exc:
        raise SystemExit(f"outcommit demo --store {kind} needs the outcommit-{kind} plugin with its "
                         f"embedded server: {install_command(f'outcommit-{kind}', 'test')}."
                         f" ({exc})") from None


def start_store(kind: str, dest: str | None) -> DemoStore:
    name = f"events-{uuid.uuid4().hex[:8]}"
    if kind == "file":
        workdir = tempfile.mkdtemp(prefix="outcommit-demo-")
        return DemoStore("file", dest or f"file://{workdir}/{name}",
                         stop=lambda: shutil.rmtree(workdir, ignore_errors=True),
                         reach=[f"output directory: {workdir}"], description="local directory")
    server, endpoint, config, container = _embedded_server(kind)
    config = {str(k): str(v) for k, v in config.items()}
    scheme = {"s3": "s3", "azure": "abfs", "gcs": "gs"}[kind]
    conf = " ".join(f"--conf {k}={v}" for k, v in sorted(config.items()))
    reach = [f"endpoint:    {endpoint}",
             f"destination: {scheme}://{container}/{name}",
             f"config:      {conf}",
             f"e.g.:        outcommit success {scheme}://{container}/{name} {conf}"]
    label = {"s3": "embedded S3 (moto server", "azure": "Azurite (", "gcs": "GCS emulator ("}[kind]
    return DemoStore(kind, dest or f"{scheme}://{container}/{name}", config, server.stop, reach,
                     f"{label} at {endpoint})")


def _quiet_hangups() -> None:
    """The GCS emulator prints a traceback whenever a client closes a connection early."""
    import socketserver

    original = socketserver.BaseServer.handle_error

    def handle_error(self: Any, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            return  # the client hung up: nothing lost, nothing to report
        original(self, request, client_address)

    socketserver.BaseServer.handle_error = handle_error  # type: ignore[method-assign]


# -- the run -----------------------------------------------------------------------------
def java_available() -> bool:
    home = os.environ.get("JAVA_HOME")
    return bool(shutil.which("java") or (home and os.path.exists(os.path.join(home, "bin", "java"))))


def start_spark(store: DemoStore, tasks: int) -> Any:
    os.environ["PYSPARK_PYTHON"] = sys.executable  # workers need this interpreter's pyarrow
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master("local[2,3]")  # 3 attempts per task: Spark retries
               .appName("outcommit-demo")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "true")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.sql.shuffle.partitions", str(tasks)))
    # Store settings reach outcommit the way a Spark user gives them: as session config.
    for key, value in store.config.items():
        builder = builder.config(f"spark.{key}" if key.startswith("outcommit.") else key, value)
    spark = builder.getOrCreate()
    # The injected failure is expected: keep Spark's stack traces of it off the console.
    spark.sparkContext.setLogLevel("OFF")
    import outcommit.spark

    outcommit.spark.register(spark)
    return spark


def read_back(destination: str, config: dict[str, str]) -> Any:
    """Every data file under the destination, with its Hive partition values as columns."""
    import io
    from urllib.parse import unquote

    import pyarrow as pa
    import pyarrow.parquet as pq

    from outcommit.factory import open_store

    store = open_store(destination, config)
    root = store.strip(destination)
    tables = []
    for info in store.list_files(root):
        parts = info.path[len(root) + 1:].split("/")
        # Only data: Hadoop's rule hides names starting with '_' or '.' (_SUCCESS, _temporary, __magic).
        if any(p.startswith(("_", ".")) for p in parts):
            continue
        # Whole-file reads: no fsspec read-ahead tasks left behind on async stores.
        table = pq.read_table(io.BytesIO(store.read_bytes(info.path)))
        for segment in parts[:-1]:
            key, _, value = segment.partition("=")
            table = table.append_column(key, pa.array([unquote(value)] * table.num_rows, pa.string()))
        tables.append(table)
    return pa.concat_tables(tables, promote_options="default") if tables else pa.table({})


def pending_uploads(destination: str, config: dict[str, str]) -> int | None:
    from outcommit.factory import open_store

    store = open_store(destination, config)
    multipart = store.multipart()
    return None if multipart is None else len(multipart.list_pending(store.strip(destination)))


def run_spark(args: argparse.Namespace, store: DemoStore) -> tuple[dict[str, Any], Any]:
    say("starting local PySpark (local[2], 3 attempts per task)")
    started = time.monotonic()
    spark = start_spark(store, args.tasks)
    say(f"Spark {spark.version} ready in {time.monotonic() - started:.1f}s")
    df = generate_spark(spark, args.rows, args.tasks)
    say(f"generating {args.rows:,} event rows in {args.tasks} partitions; computing the input checksum")
    expected = checksum(df.toArrow())
    say(f"input: {expected[0]:,} rows, checksum {expected[1]}")
    writer = (df.write.format("outcommit").mode("overwrite")
              .option("partitionBy", "date").option("maxRowsPerFile", 0)
              .option("_failTaskOnce", str(min(FAILING_TASK, args.tasks - 1))))
    if args.committer:
        writer = writer.option("committer", args.committer)
    if _bars(args):  # job commit runs in a Python worker of the driver: it draws the bar
        writer = writer.option("outcommit.progress.bar", "true")
    say(f"writing to {store.destination}; task {min(FAILING_TASK, args.tasks - 1)}'s first attempt "
        "will fail mid-write (Spark retries it)")
    started = time.monotonic()
    writer.save(store.destination)
    elapsed = time.monotonic() - started
    say(f"write committed in {elapsed:.1f}s")
    return {"expected": expected, "elapsed": elapsed}, spark


def _bars(args: argparse.Namespace) -> bool:
    choice = getattr(args, "progress", "auto")
    return choice == "on" or (choice == "auto" and sys.stderr.isatty())


def run_local(args: argparse.Namespace, store: DemoStore) -> dict[str, Any]:
    import pyarrow as pa

    from outcommit.progress import show_bars

    show_bars(_bars(args))
    from outcommit.engine.local import FailurePoint, LocalDriver

    say(f"generating {args.rows:,} event rows in {args.tasks} tasks (local engine, no Spark)")
    tables = generate_local(args.rows, args.tasks)
    expected = checksum(pa.concat_tables(tables))
    started = time.monotonic()
    driver = LocalDriver(store.destination, committer=args.committer, config=store.config,
                         partition_by=["date"], workers=2,
                         failures=[FailurePoint(task=min(FAILING_TASK, args.tasks - 1), attempt=0,
                                                point="mid-write", after_files=2, crash=True)],
                         progress=say)
    driver.run(tables)
    return {"expected": expected, "elapsed": time.monotonic() - started}


def _print_outcome(report: Any, store: DemoStore, outcome: dict[str, Any], engine: str,
                   found: tuple[int, str], pending: int | None, ok: bool) -> None:
    metrics, expected = report.metrics, outcome["expected"]
    print()
    print(f"committer:        {report.committer} -- chosen because: "
          f"{report.diagnostics.get('selection', '?')}")
    print(f"destination:      {store.destination}")
    print(f"written:          {metrics.get('files.written', '?')} files, "
          f"{metrics.get('bytes.written', 0):,} bytes, {metrics.get('rows.written', 0):,} rows "
          f"in {outcome['elapsed']:.1f}s ({engine} engine)")
    if "spark.task.retries" in metrics:
        print(f"task retries:     {metrics['spark.task.retries']} (the injected mid-write failure)")
    if metrics.get("uploads.aborted.other"):
        print(f"leftovers:        {metrics['uploads.aborted.other']} upload(s) of failed attempts "
              "aborted at job commit")
    print("pending uploads:  " + ("n/a (store has no multipart uploads)" if pending is None
                                  else f"{pending} left under the destination"))
    print(f"_SUCCESS:         success={report.success} job={report.jobId} "
          f"({report.jobIdSource}) files.committed={metrics.get('files.committed')}")
    print("  metrics:        " + ", ".join(f"{k}={v}" for k, v in sorted(metrics.items())))
    print(f"verification:     input {expected[0]:,} rows, checksum {expected[1]}; "
          f"read back {found[0]:,} rows, checksum {found[1]} -> {'OK' if ok else 'MISMATCH'}")


def main(args: argparse.Namespace) -> int:
    global _NARRATION
    _NARRATION = sys.stderr if getattr(args, "json", False) else sys.stdout
    from outcommit.factory import open_store
    from outcommit.success import SUCCESS_FILE, load_success

    engine = getattr(args, "engine", "spark")
    if engine == "spark" and not java_available():
        print(f"outcommit demo: Java was not found (no java on PATH, JAVA_HOME unset).\n{JAVA_HELP}",
              file=sys.stderr)
        return 2
    if engine == "spark":
        try:
            import pyspark  # noqa: F401
        except ImportError:
            print(f"outcommit demo: PySpark is not installed: {install_command('outcommit', 'spark')} "
                  "(or run: outcommit demo --engine local --store file)", file=sys.stderr)
            return 2
    say(f"starting the {args.store} store")
    store = start_store(args.store, args.dest)
    say(f"store: {store.description or store.kind}; destination {store.destination}")
    spark = None
    try:
        if engine == "spark":
            outcome, spark = run_spark(args, store)
        else:
            outcome = run_local(args, store)
        say("reading the output back")
        data = read_back(store.destination, store.config)
        found = checksum(data)
        fs_store = open_store(store.destination, store.config)
        report = load_success(fs_store, fs_store.join(fs_store.strip(store.destination), SUCCESS_FILE))
        pending = pending_uploads(store.destination, store.config)
        expected = outcome["expected"]
        ok = found == expected and report.success and not pending
        if getattr(args, "json", False):
            print(json.dumps({
                "ok": ok, "engine": engine, "store": store.kind, "destination": store.destination,
                "committer": report.committer, "selection": report.diagnostics.get("selection"),
                "elapsed_s": round(outcome["elapsed"], 3), "pending_uploads": pending,
                "input": {"rows": expected[0], "checksum": expected[1]},
                "read_back": {"rows": found[0], "checksum": found[1]},
                "success": report.to_dict()}, indent=2))
        else:
            _print_outcome(report, store, outcome, engine, found, pending, ok)
        if args.keep:
            print("\nkept:\n  " + "\n  ".join(store.reach), file=_NARRATION)
            if store.kind != "file":
                if spark is not None:
                    spark.stop()  # only the server stays up
                    spark = None
                print("  (server up until Ctrl-C)", file=_NARRATION, flush=True)
                try:
                    while True:
                        time.sleep(3600)
                except KeyboardInterrupt:
                    pass
        return 0 if ok else 1
    finally:
        if spark is not None:
            spark.stop()
        if not args.keep or store.kind != "file":
            store.stop()
