"""The round trips a job makes one after another, per engine, committer and size (issue 30).

    python benchmarks/critical_path.py [--engines api,local,spark,ray,dask,polars,deltalake,dataset]
        [--committers magic,directory,partitioned] [--files 1,7,56,1000] [--delay-ms 300]
        [--large-delay-ms 1000] [--check-delay-ms 600] [--rows 160000]

Every request of a job goes through the project's proxy (``outcommit_devtools.faultproxy``,
its own process, in front of a counting moto server in another) in ``floor`` mode: no
answer leaves earlier than ``--delay-ms`` after its request arrived, the server working
meanwhile. The proxy records arrivals and answers in its own event order, and the
longest chain of requests each arriving after the one before was answered is the job's
*sequential round trips* (:func:`outcommit_devtools.faultproxy.critical_path`: how, and
why the delay makes it faithful). A count, not a timing: at 30 ms per round trip it is
the job's floor in latency, whatever the machine's speed.

Sizes: 1 file (1 task x 1 day), 7 (1 x 7), 56 (8 x 7), 1,000 (8 x 125), the rows of
``peers.py`` (partitioned by ``day``). Engines: ``api`` (the committer API, tasks one after
another, phases marked between the calls: exact per phase), ``local`` (``LocalDriver``, 2
workers), ``spark`` (the data source on ``local[2]``), ``ray`` (``outcommit.ray.Datasink``,
``num_cpus=2``), ``dask`` (``outcommit.dask.to_parquet``, threads). For the engines, whose
phases overlap (a task commits while the next writes), the chain's requests are
attributed by what they are: ``setup`` (the job marker's PUT), ``data`` (multipart
creates and parts: the writes of ``magic``, the uploads of the staging committers' task
commit), ``task`` (pendingset, claim, the task's job check), ``job`` (the rest).

The peers (``--engines polars,deltalake,dataset``: ``peers.py``'s writers; Polars and
deltalake at the one-task sizes) run through the same proxy, for their counts beside these.

``--check-delay-ms``: run every cell again at a second delay and print both counts: a
count that changes with the delay has a link that was only a coincidence of timing.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
import urllib.request
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from outcommit_devtools.faultproxy import PHASE_PATH, TRACE_PATH, Trace, TracedRequest, critical_path
from peers import (
    ROWS,
    WHOLE_ONLY,
    WRITERS,
    Context,
    Job,
    make_tables,
    spark_frame,
    spark_session,
    write_api,
    write_spark,
)
from spark_write import moto_behind_proxy, take_counts

ENGINES = ("api", "local", "spark", "ray", "dask", "polars", "deltalake", "dataset")
#: The peers of ``peers.py``, for their round trips beside outcommit's (no committer;
#: Polars and deltalake write a whole table: the one-task sizes only).
PEERS = ("polars", "deltalake", "dataset")
COMMITTERS = ("magic", "directory", "partitioned")
SIZES = {1: (1, 1), 7: (1, 7), 56: (8, 7), 1000: (8, 125)}
KINDS = ("setup", "data", "task", "job")
LARGE = 1000


def mark_phase(proxy_url: str, name: str) -> None:
    request = urllib.request.Request(proxy_url + PHASE_PATH + urllib.request.quote(name), method="PUT")
    with urllib.request.urlopen(request) as answer:
        answer.read()


def take_trace(proxy_url: str) -> list[TracedRequest]:
    """The proxy's recording since the last call (and a new one begins)."""
    with urllib.request.urlopen(proxy_url + TRACE_PATH + "?reset=1") as answer:
        return Trace.requests_of(json.loads(answer.read()))


def kind_of(request: TracedRequest) -> str:
    """What a request of an S3 committer's job is for (the module docstring's four kinds);
    a HEAD of the job marker is ``check`` until :func:`attribute` places it."""
    keys = {part.split("=", 1)[0] for part in request.query.split("&") if part}
    if request.path.endswith("/_job.json"):
        return {"PUT": "setup", "HEAD": "check"}.get(request.method, "job")
    if (request.method == "POST" and "uploads" in keys) or (request.method == "PUT" and "partNumber" in keys):
        return "data"
    if request.method == "PUT" and "/pendingsets/" in request.path:
        return "task"
    return "job"


def attribute(chain: tuple[TracedRequest, ...]) -> Counter[str]:
    """The chain's round trips by kind. A job check (HEAD of the marker) belongs to job
    commit where it opens the chain's final run of job-commit requests right after a
    task's own check; otherwise to its task's commit."""
    seen = [kind_of(r) for r in chain]
    end = len(seen)
    while end > 0 and seen[end - 1] == "job":
        end -= 1
    kinds = [("job" if i == end - 1 and i > 0 and seen[i - 1] == "check" else "task") if kind == "check"
             else kind for i, kind in enumerate(seen)]
    return Counter(kinds)


# -- engines ------------------------------------------------------------------------------------------
@dataclass
class Engines:
    """Starts Spark, Ray or a Dask scheduler on first use; stops them at the end."""

    stack: contextlib.ExitStack
    spark: Any = None
    ray_started: bool = False

    def spark_session(self) -> Any:
        if self.spark is None:
            self.spark = self.stack.enter_context(spark_session())
        return self.spark

    def ray(self) -> Any:
        import ray

        if not self.ray_started:
            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False,
                     object_store_memory=256 * 1024 * 1024)
            ray.data.DataContext.get_current().enable_progress_bars = False
            self.stack.callback(ray.shutdown)
            self.ray_started = True
        return ray


def run_engine(engine: str, engines: Engines, ctx: Context, key: str, committer: str,
               mark: Callable[[str], None]) -> None:
    url = ctx.url(key)
    if engine in PEERS:
        WRITERS[engine](ctx, key)
    elif engine == "api":
        write_api(ctx, key, mark=mark, committer_name=committer)
    elif engine == "local":
        from outcommit.engine.local import LocalDriver

        LocalDriver(url, committer=committer, config=ctx.config, workers=ctx.workers,
                    partition_by=["day"]).run(ctx.tables)
    elif engine == "spark":
        write_spark(ctx, key, committer_name=committer)
    elif engine == "ray":
        import outcommit.ray

        ray = engines.ray()
        sink = outcommit.ray.Datasink(url, committer=committer, config=ctx.config, partition_by=["day"])
        ray.data.from_arrow(ctx.tables).write_datasink(sink)
    elif engine == "dask":
        import dask.dataframe as dd
        import pyarrow as pa

        import outcommit.dask

        ddf = dd.from_pandas(pa.concat_tables(ctx.tables).to_pandas(), npartitions=len(ctx.tables),
                             sort=False)
        outcommit.dask.to_parquet(ddf, url, committer=committer, config=ctx.config, partition_by=["day"],
                                  scheduler="threads", num_workers=ctx.workers)
    else:
        raise ValueError(engine)


@dataclass
class Cell:
    engine: str
    committer: str
    files: int
    requests: int
    completions: int
    peak: int
    trips: int
    kinds: Counter[str]
    phases: dict[str, int]
    wall: float


def measure(engine: str, engines: Engines, ctx: Context, committer: str, moto_url: str,
            proxy_url: str) -> Cell:
    key = f"cp-{engine}-{committer}-{ctx.job.files}-{uuid.uuid4().hex[:8]}"
    take_trace(proxy_url)
    take_counts(moto_url)
    seq = iter(range(10**6))
    started = time.perf_counter()
    run_engine(engine, engines, ctx, key, committer,
               lambda name: mark_phase(proxy_url, f"{name}#{next(seq)}"))
    wall = time.perf_counter() - started
    requests = take_trace(proxy_url)
    counted, _ = take_counts(moto_url)
    path = critical_path(requests)
    phases: Counter[str] = Counter()
    for name, length in path.by_phase.items():
        phases[name.split("#")[0] or "job"] += length
    cell = Cell(engine, committer, ctx.job.files, len(requests), counted.get("CompleteMultipartUpload", 0),
                path.peak_in_flight, path.length, attribute(path.chain), dict(phases), wall)
    if engine not in PEERS and cell.completions != ctx.job.files:
        raise SystemExit(f"{engine}/{committer}: {cell.completions} uploads completed, "
                         f"expected {ctx.job.files} files")
    return cell


@contextlib.contextmanager
def traced_server(delay_ms: float) -> Iterator[tuple[str, str, str]]:
    with moto_behind_proxy(delay_ms, delay_mode="floor", trace=True) as servers:
        yield servers


def delay_for(files: int, delay_ms: float, large_delay_ms: float) -> float:
    """The delay of a size: a job of 1,000 files runs rounds of 64 completions, which
    the emulator serves in about half a second: the floor must cover that."""
    return large_delay_ms if files >= LARGE else delay_ms


def run(args: argparse.Namespace, engines: Engines, delays: tuple[float, float], engines_list: list[str],
        committers: list[str], sizes: list[int]) -> list[Cell]:
    cells = []
    by_delay: dict[float, list[int]] = {}
    for files in sizes:
        by_delay.setdefault(delay_for(files, *delays), []).append(files)
    for delay_ms, group in by_delay.items():
        with traced_server(delay_ms) as (moto_url, proxy_url, proxy_line):
            from outcommit_s3.embedded import EmbeddedS3

            config = dict(EmbeddedS3(endpoint_url=proxy_url, server=None).config)
            print(f"# {proxy_line}; moto (own process) at {moto_url}", flush=True)
            for files in group:
                cells += run_size(args, engines, engines_list, committers, files, proxy_url, moto_url,
                                  config, delay_ms)
    return cells


def run_size(args: argparse.Namespace, engines: Engines, engines_list: list[str], committers: list[str],
             files: int, proxy_url: str, moto_url: str, config: dict[str, str],
             delay_ms: float) -> list[Cell]:
    tasks, days = SIZES[files]
    tables = make_tables(args.rows, tasks, days)
    small = make_tables(min(args.rows, 1600), 1, 1)
    job = Job(f"{files}", tasks, days)
    cells = []
    for engine in engines_list:
        spark = engines.spark_session() if engine == "spark" else None
        frame = spark_frame(spark, tables) if spark is not None else None
        warm_frame = spark_frame(spark, small) if spark is not None else None
        ctx = Context(proxy_url, config, tables, job, args.workers, spark_df=frame)
        warm = Context(proxy_url, config, small, Job("1", 1, 1), args.workers, spark_df=warm_frame)
        if engine in PEERS and (ctx.job.tasks > 1 and engine in WHOLE_ONLY):
            continue
        for committer in (committers if engine not in PEERS else ["-"]):
            if engine != "api":  # warm (a one-file job): the engine's workers, imports, connections
                run_engine(engine, engines, warm, f"warm-{uuid.uuid4().hex[:8]}", committer, lambda _: None)
            cell = measure(engine, engines, ctx, committer, moto_url, proxy_url)
            cells.append(cell)
            print_cell(cell, delay_ms)
        for cached in (frame, warm_frame):
            if cached is not None:
                cached.unpersist()
    return cells


def print_header() -> None:
    print(f"{'engine':9s} {'committer':12s} {'files':>6s} {'requests':>9s} {'peak':>5s} {'serial':>7s}  "
          f"{'setup':>5s} {'data':>5s} {'task':>5s} {'job':>5s}  marked phases (api)")


def print_cell(cell: Cell, delay_ms: float) -> None:
    kinds = "  ".join(f"{cell.kinds.get(k, 0):5d}" if cell.committer != "-" else f"{'':5s}" for k in KINDS)
    phases = ", ".join(f"{k} {v}" for k, v in cell.phases.items()) if cell.engine == "api" else ""
    print(f"{cell.engine:9s} {cell.committer:12s} {cell.files:6,d} {cell.requests:9,d} {cell.peak:5d} "
          f"{cell.trips:7d}  {kinds}  {phases}   [{cell.wall:.1f} s at {delay_ms:g} ms]", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engines", default=",".join(ENGINES),
                        help=f"of {', '.join(ENGINES)}")
    parser.add_argument("--committers", default=",".join(COMMITTERS))
    parser.add_argument("--files", default="1,7,56,1000", help=f"sizes, of {', '.join(map(str, SIZES))}")
    parser.add_argument("--delay-ms", type=float, default=300.0,
                        help="floor of every round trip: large against the client's CPU per fan-out")
    parser.add_argument("--large-delay-ms", type=float, default=1000.0,
                        help="the floor for 1,000 files: above the emulator's time for a round of "
                             "64 completions")
    parser.add_argument("--check-delay-ms", type=float, default=0.0,
                        help="run every cell again at this delay (both sizes) and compare the counts")
    parser.add_argument("--rows", type=int, default=ROWS)
    parser.add_argument("--workers", type=int, default=2, help="LocalDriver's workers, Dask's threads")
    args = parser.parse_args(argv)
    engines_list = [e for e in args.engines.split(",") if e]
    committers = [c for c in args.committers.split(",") if c]
    sizes = [int(f) for f in args.files.split(",") if f]
    bad = [e for e in engines_list if e not in ENGINES] + [str(s) for s in sizes if s not in SIZES]
    if bad:
        parser.error(f"unknown engine or size {bad[0]!r}: engines {', '.join(ENGINES)}; "
                     f"sizes {', '.join(map(str, SIZES))}")
    print(f"sequential round trips: {args.rows:,} rows partitioned by day; 'serial' = the longest "
          f"chain of requests each sent after the one before was answered; 'peak' = most requests "
          f"in flight at once; setup/data/task/job = the chain's round trips by kind")
    print_header()
    with contextlib.ExitStack() as stack:
        engines = Engines(stack)
        cells = run(args, engines, (args.delay_ms, args.large_delay_ms), engines_list, committers, sizes)
        if args.check_delay_ms:
            print(f"\nagain at {args.check_delay_ms:g} ms:")
            print_header()
            again = run(args, engines, (args.check_delay_ms, args.check_delay_ms), engines_list,
                        committers, sizes)
            changed = [(a, b) for a, b in zip(cells, again, strict=True) if a.trips != b.trips]
            for a, b in changed:
                print(f"  changed with the delay: {a.engine} {a.committer} {a.files} files: "
                      f"{a.trips}, then {b.trips} at {args.check_delay_ms:g} ms")
            print(f"counts equal at both delays: {len(cells) - len(changed)} of {len(cells)} cells")
    return 0


if __name__ == "__main__":
    sys.exit(main())
