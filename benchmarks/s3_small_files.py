"""A job of many small files with ``directory`` (staging) and ``magic``, with and without latency.

    python benchmarks/s3_small_files.py [--tasks 10] [--files 100] [--size 4096] [--delay-ms 25]

The report behind it: a ``directory`` job of 1,000 small files on the moto server had not
finished after 7 minutes. Here the same job runs through the committers' own API (tasks
on ``--workers`` threads, each writing its files through the committer's filesystem and
committing, then job commit), against a moto server in its own process, once directly
and once through the loopback latency proxy (``--delay-ms`` added to every request).
Prints each phase's wall time and the exact requests by operation, counted at the server.
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import outcommit
from outcommit import JobContext
from outcommit_s3.embedded import EmbeddedS3
from spark_write import BUCKET, moto_behind_proxy, take_counts


def run_job(name: str, url: str, config: dict[str, Any], tasks: int, files: int, size: int,
            workers: int) -> dict[str, float]:
    committer = outcommit.create_committer(url, config, name)
    job = JobContext(url, config=committer.config)
    payload = b"s" * size
    times: dict[str, float] = {}
    started = time.perf_counter()
    committer.setup_job(job)
    times["setup"] = time.perf_counter() - started

    def task(index: int) -> dict[str, Any]:
        attempt = job.task_attempt(index)
        committer.setup_task(attempt)
        fs, base = committer.filesystem(attempt), committer.work_path(attempt)
        for i in range(files):
            with fs.open(f"{base}/part-{index:05d}-{i:04d}.bin", "wb") as f:
                f.write(payload)
        return committer.commit_task(attempt)

    started = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        messages = list(pool.map(task, range(tasks)))
    times["tasks"] = time.perf_counter() - started
    started = time.perf_counter()
    committer.commit_job(job, messages)
    times["job commit"] = time.perf_counter() - started
    store = outcommit.open_store(url, config)
    visible = [f for f in store.list_files(store.strip(url)) if "/_" not in f.path]
    assert len(visible) == tasks * files, f"{name}: {len(visible)} files visible"
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=10)
    parser.add_argument("--files", type=int, default=100, help="files per task")
    parser.add_argument("--size", type=int, default=4096, help="bytes per file")
    parser.add_argument("--workers", type=int, default=2, help="task threads")
    parser.add_argument("--delay-ms", type=float, default=25.0)
    parser.add_argument("--committers", default="directory,magic")
    args = parser.parse_args(argv)

    with moto_behind_proxy(args.delay_ms) as (moto_url, proxy_url, proxy_line):
        total = args.tasks * args.files
        print(f"{total} files ({args.tasks} tasks x {args.files} x {args.size} bytes), "
              f"{args.workers} task threads; moto server (own process); {proxy_line}")
        for endpoint, where in ((moto_url, "moto directly"), (proxy_url,
                                                              f"through the proxy (+{args.delay_ms:g} ms)")):
            config = {**EmbeddedS3(endpoint_url=endpoint, server=None).config,
                      "outcommit.s3.staging.tmp-dir": "/tmp/outcommit-bench-staging"}
            for name in (c for c in args.committers.split(",") if c):
                take_counts(moto_url)
                started = time.perf_counter()
                times = run_job(name, f"s3://{BUCKET}/small-{name}-{time.monotonic_ns()}", config,
                                args.tasks, args.files, args.size, args.workers)
                elapsed = time.perf_counter() - started
                counts, cpu = take_counts(moto_url)
                phases = ", ".join(f"{k} {v:.2f} s" for k, v in times.items())
                detail = ", ".join(f"{k} {v}" for k, v in counts.most_common())
                print(f"  {where:28s} {name:10s} total {elapsed:6.2f} s ({phases}); "
                      f"{sum(counts.values())} requests ({sum(counts.values()) / total:.2f}/file): {detail}; "
                      f"moto's CPU {sum(cpu.values()):.2f} s", flush=True)
        return 0


if __name__ == "__main__":
    sys.exit(main())
