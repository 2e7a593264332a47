"""Job commit on S3: magic and directory (zero rename) against v1 forced onto S3 (copy + delete).

    python benchmarks/s3_commit.py [--tasks 50] [--files 20] [--size 131072] [--threads 32]

Runs against an embedded moto server and reports, per committer and thread count:
1. exact request counts by S3 operation, bytes uploaded and copied server-side, listings
   (botocore hooks on the committer's client: store-independent);
2. the job commit's time under the cost model of ``outcommit_devtools.costmodel`` (every
   request priced on a virtual clock that follows the committer's real parallelism);
3. wall time on moto, a sanity check only (moto is one GIL-bound process).
Only the job commit is measured; task output is prepared before.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import outcommit
from outcommit import JobContext
from outcommit_devtools.costmodel import CostModel, Meter, metered_job_commit
from outcommit_s3.embedded import start_moto_server

BUCKET = "bench"


def prepare(name: str, url: str, config: dict[str, Any], tasks: int, files: int, size: int) -> tuple:
    committer = outcommit.create_committer(url, config, name, allow_unsafe=(name == "v1"))
    job = JobContext(url, config=committer.config)
    committer.setup_job(job)
    payload = b"o" * size

    def run(index: int) -> dict[str, Any]:
        task = job.task_attempt(index)
        committer.setup_task(task)
        fs, base = committer.filesystem(task), committer.work_path(task)
        for i in range(files):
            with fs.open(f"{base}/part-{index:05d}-{i:03d}.bin", "wb") as f:
                f.write(payload)
        return committer.commit_task(task)

    with ThreadPoolExecutor(max_workers=8) as pool:
        messages = list(pool.map(run, range(tasks)))
    return committer, job, messages


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=50)
    parser.add_argument("--files", type=int, default=20, help="files per task")
    parser.add_argument("--size", type=int, default=128 * 1024, help="bytes per file")
    parser.add_argument("--threads", type=int, default=32)
    parser.add_argument("--latency", type=float, default=0.030, help="seconds per request")
    parser.add_argument("--copy-mbps", type=float, default=8.0, help="server-side copy MB/s")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    warnings.filterwarnings("ignore", message="using unsafe committer")  # v1 is forced on purpose
    logging.getLogger("outcommit").setLevel(logging.WARNING)

    model = CostModel(request_latency=args.latency, copy_bandwidth=args.copy_mbps * 1e6)
    server = start_moto_server([BUCKET], max_attempts=3)  # moto may 500 a listing racing a delete
    side = server.client()  # unmetered: sizes of copy sources

    def size_of(bucket: str, key: str) -> int:
        return int(side.head_object(Bucket=bucket, Key=key)["ContentLength"])

    total_files = args.tasks * args.files
    print(f"job commit of {args.tasks} tasks x {args.files} files x {args.size} bytes "
          f"= {total_files} files, {total_files * args.size / 1e6:.1f} MB")
    print("cost model:", ", ".join(f"{k}={v}" for k, v in model.describe().items()))
    scenarios = [("magic", 1), ("magic", args.threads), ("directory", 1), ("directory", args.threads),
                 ("v1", args.threads)]
    results: dict[tuple[str, int], Meter] = {}
    try:
        for name, threads in scenarios:
            url = f"s3://{BUCKET}/{name}-{threads}"
            config = {**server.config, "outcommit.committer.threads": str(threads),
                      "outcommit.s3.connection.maximum": str(threads + 16)}
            started = time.perf_counter()
            committer, job, messages = prepare(name, url, config, args.tasks, args.files, args.size)
            prepared = time.perf_counter() - started
            meter = metered_job_commit(committer, job, messages, model, size_of)
            store = outcommit.open_store(url, config)
            visible = [f for f in store.list_files(store.strip(url)) if "/_" not in f.path]
            assert len(visible) == total_files, f"{name}: {len(visible)} files visible"
            results[(name, threads)] = meter
            print(f"  ran {name:<9} threads={threads:<3} (prepared in {prepared:.1f} s)", flush=True)
    finally:
        server.stop()

    print()
    header = (f"{'committer':<10}{'threads':>8}{'requests':>10}{'complete':>10}{'copy':>7}{'delete':>8}"
              f"{'other':>7}{'listings':>9}{'MB up':>8}{'MB copied':>10}{'modelled s':>12}{'wall s':>8}")
    print(header)
    print("-" * len(header))
    for (name, threads), m in results.items():
        complete = m.requests["CompleteMultipartUpload"]
        copy = m.requests["CopyObject"] + m.requests["UploadPartCopy"]
        delete = m.requests["DeleteObject"] + m.requests["DeleteObjects"]
        print(f"{name:<10}{threads:>8}{m.total_requests:>10}{complete:>10}{copy:>7}{delete:>8}"
              f"{m.total_requests - complete - copy - delete:>7}{m.listings:>9}"
              f"{m.bytes_uploaded / 1e6:>8.2f}{m.bytes_copied / 1e6:>10.1f}"
              f"{m.modelled_seconds:>12.2f}{m.wall_seconds:>8.2f}")
    print()
    for (name, threads), m in results.items():
        print(f"{name} threads={threads} requests by operation: {dict(sorted(m.requests.items()))}")
    print()
    magic, v1 = results[("magic", args.threads)], results[("v1", args.threads)]
    limit = total_files * args.latency / args.threads
    checks = [
        ("zero bytes copied by magic/directory",
         all(m.bytes_copied == 0 for (n, _), m in results.items() if n != "v1"), ""),
        ("job commit requests <= files + O(tasks) (magic, directory)",
         all(m.total_requests <= total_files + 2 * args.tasks + 10
             for (n, _), m in results.items() if n != "v1"),
         f"magic {magic.total_requests} for {total_files} files"),
        (f"modelled magic commit with {args.threads} threads within 1.5x of the request-bound limit",
         magic.modelled_seconds <= 1.5 * limit,
         f"{magic.modelled_seconds:.2f} s vs limit {limit:.2f} s = {magic.modelled_seconds / limit:.2f}x"),
        ("modelled magic commit >= 10x faster than modelled v1 on the same files",
         v1.modelled_seconds >= 10 * magic.modelled_seconds,
         f"v1 {v1.modelled_seconds:.2f} s / magic {magic.modelled_seconds:.2f} s = "
         f"{v1.modelled_seconds / magic.modelled_seconds:.1f}x"),
        (f"{args.threads} threads vs 1 (magic, modelled)", True,
         f"{results[('magic', 1)].modelled_seconds / magic.modelled_seconds:.1f}x faster"),
    ]
    failed = 0
    for label, ok, detail in checks:
        failed += not ok
        print(f"[{'ok' if ok else 'MISSED'}] {label}{': ' + detail if detail else ''}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
