"""Job commit beyond one process: measured here at 1 and 2 processes, modelled for a 16-core driver.

    python benchmarks/job_commit_model.py [--files 2000] [--processes 1,2] [--latency-ms 30]
        [--cores 16] [--model-files 100000,1000000] [--prefixes 1,10,100] [--light]
        [--threads 64] [--keep-alive]

Measured (issue 30, "job commit beyond one process"):

1. ``--processes P``: a driver process commits a real ``magic`` job of ``--files`` small
   files with ``outcommit.job-commit.processes=P`` (its completions in P worker processes;
   1: in the driver), against one moto server in another process, on this machine's
   cores. The job commit's client CPU is the driver's CPU time and its finished children's
   (the workers', counted when the pool ends), per file. ``--threads``: the committer's
   threads (``outcommit.committer.threads``, one measurement per value). moto's server
   (werkzeug) answers every request with ``Connection: close``, so each request pays a
   TCP connect and close that S3, which keeps connections alive, does not;
   ``--keep-alive`` sends them through the project's fault proxy (its own process, no
   latency, no faults), which keeps the client's connections alive as S3 does.
2. The job commit's round trips in sequence beyond its completions: the cost model's
   virtual clock (``outcommit_devtools.costmodel``) on a small real commit, at one unit
   per request and more connections than files (what
   ``tests/devtools/test_faultproxy.py`` checks against the proxy's count).

Modelled, for a driver of ``--cores`` cores running one committer process per core, each
with the store's 64 connections:

    cpu bound         files x cpu_per_file / min(processes, cores)
    connection bound  files x latency / (processes x connections)
    prefix bound      files / (3,500 x prefixes)        S3's published PUT rate per prefix
    job commit        max(the three) + fixed round trips x latency

The latency is a parameter, not a measurement (no S3 here): the project's 30 ms per
request, as every other model in docs/performance.md. The 3,500 PUT/s per prefix is S3's
published rate (a CompleteMultipartUpload is a PUT-class request); the files are assumed
spread evenly over ``prefixes`` (partitions), each with its own token bucket.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from s3_commit_scale import BUCKET, start_moto_process

#: S3's published request rate per prefix for PUT/COPY/POST/DELETE.
S3_PUTS_PER_PREFIX = 3500
CONNECTIONS = 64


def cpu_now() -> float:
    """This process's CPU time and its finished children's (seconds)."""
    import resource

    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def commit_in_process(endpoint: str, files: int, processes: int, results: Any, light: bool = False,
                      threads: int = CONNECTIONS) -> None:
    """Publish a magic job of ``files`` small files (8 tasks), commit it in ``processes``."""
    import outcommit
    from outcommit_s3.embedded import EmbeddedS3

    server = EmbeddedS3(endpoint_url=endpoint, server=None, max_attempts=3)
    url = f"s3://{BUCKET}/model-{time.monotonic_ns()}-{multiprocessing.current_process().pid}"
    config = {**server.config, "outcommit.committer.threads": str(threads),
              "outcommit.job-commit.processes": str(processes),
              "outcommit.s3.light-requests": str(light).lower()}
    committer = outcommit.create_committer(url, config, "magic")
    job = outcommit.JobContext(url, config=committer.config)
    committer.setup_job(job)
    messages = []
    for index in range(8):
        task = job.task_attempt(index)
        committer.setup_task(task)
        fs, base = committer.filesystem(task), committer.work_path(task)
        for n in range(index, files, 8):
            fs.pipe_file(f"{base}/day={n % 25:02d}/part-{n:05d}.parquet", b"x" * 1000)
        messages.append(committer.commit_task(task))
    started = cpu_now()
    committer.commit_job(job, messages)
    results.put((cpu_now() - started, sum(int(m["files"]) for m in messages)))


def measure(endpoint: str, files: int, processes: int, light: bool = False,
            threads: int = CONNECTIONS) -> tuple[float, int]:
    """(the job commit's client CPU per file, driver and workers; files committed)."""
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    driver = context.Process(target=commit_in_process,
                             args=(endpoint, files, processes, results, light, threads))
    driver.start()
    cpu, committed = results.get(timeout=1800)
    driver.join()
    return cpu / committed, committed


def fixed_round_trips(endpoint: str) -> int:
    """The job commit's round trips in sequence beyond one round of completions (cost model)."""
    import outcommit
    from outcommit_devtools.costmodel import CostModel, metered_job_commit
    from outcommit_s3.embedded import EmbeddedS3

    server = EmbeddedS3(endpoint_url=endpoint, server=None, max_attempts=3)
    url = f"s3://{BUCKET}/model-rounds-{time.monotonic_ns()}"
    config = {**server.config, "outcommit.committer.threads": "8"}
    committer = outcommit.create_committer(url, config, "magic")
    job = outcommit.JobContext(url, config=committer.config)
    committer.setup_job(job)
    task = job.task_attempt(0)
    committer.setup_task(task)
    fs, base = committer.filesystem(task), committer.work_path(task)
    for n in range(4):
        fs.pipe_file(f"{base}/day={n}/part-0.parquet", b"x" * 100)
    message = committer.commit_task(task)
    meter = metered_job_commit(committer, job, [message], CostModel(request_latency=1.0, connections=8))
    return round(meter.modelled_seconds) - 1  # less the one round of completions


def serve(stack: contextlib.ExitStack, keep_alive: bool) -> tuple[str, str]:
    """The S3 endpoint the measurements use, and how it is served (moto in its own process;
    with ``keep_alive``, behind the fault proxy, which keeps the client's connections)."""
    if keep_alive:
        from spark_write import moto_behind_proxy

        _, proxy, _ = stack.enter_context(moto_behind_proxy(0))
        return proxy, "moto in another process, behind the fault proxy: connections kept alive"
    from outcommit.testing.faults import stop_process

    server, moto = start_moto_process()
    stack.callback(stop_process, moto)
    return server.endpoint_url, "moto in another process: a connection per request"


def model(files: int, cpu_per_file: float, latency: float, cores: int, processes: int, prefixes: int,
          fixed: int) -> dict[str, float]:
    cpu = files * cpu_per_file / min(processes, cores)
    connections = files * latency / (processes * CONNECTIONS)
    prefix = files / (S3_PUTS_PER_PREFIX * prefixes)
    return {"cpu": cpu, "connections": connections, "prefix": prefix,
            "total": max(cpu, connections, prefix) + fixed * latency}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=2000, help="files of the measured job commits")
    parser.add_argument("--processes", default="1,2", help="committer processes measured at once")
    parser.add_argument("--latency-ms", type=float, default=30.0, help="the model's latency per request")
    parser.add_argument("--cores", type=int, default=16, help="the modelled driver's cores")
    parser.add_argument("--model-files", default="100000,1000000")
    parser.add_argument("--prefixes", default="1,10,100", help="prefixes the files spread over")
    parser.add_argument("--light", action="store_true",
                        help="outcommit.s3.light-requests=true, the store's default (the light"
                             " CompleteMultipartUpload path); without it false: every completion"
                             " through botocore's client")
    parser.add_argument("--threads", default=str(CONNECTIONS),
                        help="outcommit.committer.threads measured, comma-separated (the model: the first)")
    parser.add_argument("--keep-alive", action="store_true",
                        help="through the fault proxy, which keeps connections as S3 does (moto closes each)")
    args = parser.parse_args(argv)
    with contextlib.ExitStack() as stack:
        endpoint, where = serve(stack, args.keep_alive)
        fixed = fixed_round_trips(endpoint)
        measured: dict[int, float] = {}
        for threads in (int(t) for t in args.threads.split(",")):
            for processes in (int(p) for p in args.processes.split(",")):
                cpu, committed = measure(endpoint, args.files, processes, args.light, threads)
                measured.setdefault(processes, cpu)  # the model's: the first threads given
                print(f"measured: {committed:,} files committed with outcommit.job-commit.processes="
                      f"{processes}, outcommit.s3.light-requests={str(args.light).lower()}, "
                      f"outcommit.committer.threads={threads}, {cpu * 1000:.2f} ms of client CPU per "
                      f"file (driver and its worker processes; {where})", flush=True)
    cpu_per_file = measured.get(1) or min(measured.values())
    latency = args.latency_ms / 1000
    print(f"\nparameters: client CPU per file {cpu_per_file * 1000:.2f} ms (one process), "
          f"{CONNECTIONS} connections per process, latency {args.latency_ms:g} ms per request "
          f"(assumed: no S3 here), {fixed} round trips in sequence beside the completions "
          f"(measured), S3 {S3_PUTS_PER_PREFIX:,} PUT/s per prefix (published)")
    rows = [("this machine", 2, 2), (f"{args.cores}-core driver", args.cores, args.cores)]
    print(f"\n{'driver':<16}{'processes':>10}{'files':>12}{'prefixes':>10}{'cpu bound':>12}"
          f"{'connections':>13}{'prefix bound':>14}{'job commit':>12}  bound by")
    for name, processes, cores in rows:  # one committer process per core
        for files in (int(f) for f in args.model_files.split(",")):
            for prefixes in (int(p) for p in args.prefixes.split(",")):
                m = model(files, cpu_per_file, latency, cores, processes, prefixes, fixed)
                bound = max(("cpu", "connections", "prefix"), key=lambda k: m[k])
                print(f"{name:<16}{processes:>10}{files:>12,}{prefixes:>10}{m['cpu']:>11.1f}s"
                      f"{m['connections']:>12.1f}s{m['prefix']:>13.1f}s{m['total']:>11.1f}s  {bound}")
    need = 60 / 1_000_000 * args.cores
    print(f"\n1,000,000 files in 60 s on {args.cores} cores needs <= {need * 1000:.2f} ms of client CPU per "
          f"file, and >= {1_000_000 / (S3_PUTS_PER_PREFIX * 60):.1f} prefixes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
