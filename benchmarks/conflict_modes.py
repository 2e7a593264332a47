"""Conflict modes at job commit: what `fail` and `replace` add to an `append` job commit.

    python benchmarks/conflict_modes.py [--files 256] [--partitions 64] [--latency 0.03]
                                        [--connections 64] [--old-files 100]

Real jobs on the moto server (in another process, over HTTP): ``magic`` (scope: the whole
destination) writing ``--files`` files in 16 tasks, and ``partitioned`` (dynamic partition
overwrite: scope, the partitions written) writing one file into each of ``--partitions``
partitions, committed under ``append``, ``fail`` and ``replace`` into an empty destination,
and under ``replace`` into one holding ``--old-files`` files (spread over the partitions
written). Every HTTP request of the job commit is metered by botocore hooks and priced
on the cost model's virtual clock, which follows the threads that really ran; each row
prints its requests, its modelled time, that time in round trips, and its ratio to the
``append`` commit of the same job in the same run.

What it shows: the scope's listings (the destination, or each written partition
``outcommit.committer.threads`` at a time) run beside the job check and the commit
record's creation, so ``fail`` and ``replace`` into an empty destination cost the round
trips ``append`` does; ``replace`` over old files adds two: the pending uploads, listed
right after the scope (the check that they are all still pending must be fresh when old
data goes), and one ``DeleteObjects`` per 1,000 old files. Before, the listings came
after the record, one after another: a ``partitioned`` ``replace`` of 1,000 partitions
was 1,000 listings in series (30 s at 30 ms).
"""

from __future__ import annotations

import argparse
import sys
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import outcommit
from outcommit import JobContext
from outcommit.testing.faults import stop_process
from outcommit_devtools.costmodel import CostModel, Meter, metered_job_commit
from s3_commit_scale import BUCKET, start_moto_process

TASKS = 16


def job_files(committer_name: str, files: int, partitions: int) -> list[str]:
    if committer_name == "partitioned":
        return [f"day={index:04d}/part.parquet" for index in range(partitions)]
    return [f"part-{index:05d}.parquet" for index in range(files)]


def metered_commit(url: str, config: dict[str, str], committer_name: str, names: list[str],
                   model: CostModel) -> Meter:
    """Write ``names`` (1 KB each) in TASKS tasks, then meter the job commit alone."""
    committer = outcommit.create_committer(url, config, committer_name)
    job = JobContext(url, config=committer.config)
    committer.setup_job(job)
    messages = []
    for index in range(TASKS):
        task = job.task_attempt(index)
        committer.setup_task(task)
        fs, base = committer.filesystem(task), committer.work_path(task)
        for name in names[index::TASKS]:
            fs.pipe_file(f"{base}/{name}", b"x" * 1000)
        messages.append(committer.commit_task(task))
    return metered_job_commit(committer, job, messages, model)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=256, help="files of the magic job")
    parser.add_argument("--partitions", type=int, default=64, help="partitions of the partitioned job")
    parser.add_argument("--old-files", type=int, default=100, help="files in the destination before")
    parser.add_argument("--latency", type=float, default=0.03)
    parser.add_argument("--connections", type=int, default=64)
    args = parser.parse_args(argv)
    model = CostModel(request_latency=args.latency, connections=args.connections)
    print(f"cost model: {model.describe()}")
    server, process = start_moto_process()
    try:
        config = {**server.config, "outcommit.committer.threads": str(args.connections)}
        print(f"\n{'committer':12s} {'mode':8s} {'destination':12s} {'files':>6s} {'requests':>9s} "
              f"{'modelled s':>11s} {'round trips':>12s} {'vs append':>10s}  requests by operation")
        for committer_name in ("magic", "partitioned"):
            names = job_files(committer_name, args.files, args.partitions)
            dirs = sorted({name.rpartition("/")[0] for name in names})
            old = [f"{dirs[i % len(dirs)]}/old-{i:05d}.parquet".lstrip("/") for i in range(args.old_files)]
            baseline = None
            for mode, existing in (("append", []), ("fail", []), ("replace", []), ("replace", old)):
                url = f"s3://{BUCKET}/conflicts-{uuid.uuid4().hex[:8]}"
                store = outcommit.open_store(url, server.config)
                for name in existing:
                    store.write_bytes(store.join(store.strip(url), name), b"old")
                meter = metered_commit(url, {**config, "outcommit.committer.conflict-mode": mode},
                                       committer_name, names, model)
                baseline = baseline or meter.modelled_seconds
                requests = dict(sorted(meter.requests.items()))
                print(f"{committer_name:12s} {mode:8s} {'old-files' if existing else 'empty':12s} "
                      f"{len(names):6,d} {meter.total_requests:9,d} {meter.modelled_seconds:11.2f} "
                      f"{meter.modelled_seconds / args.latency:12.1f} "
                      f"{meter.modelled_seconds / baseline:9.3f}x  {requests}", flush=True)
    finally:
        stop_process(process)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
