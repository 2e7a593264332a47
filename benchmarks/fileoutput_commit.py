"""v1 vs v2 job commit on the local filesystem (issue 2's benchmark).

Writes N tasks x M files, commits every task, then times job commit for each committer,
repeated, in one run. v2 has already moved every file at task commit, so its job commit
only writes _SUCCESS; v1 merges every committed task directory at job commit. Store
operations are counted exactly by wrapping the real store.

    python benchmarks/fileoutput_commit.py [--tasks 10] [--files 100] [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import outcommit
from outcommit import JobContext
from outcommit.testing.faults import FaultInjectingStore


def run_once(committer_name: str, root: Path, tasks: int, files: int) -> dict[str, float]:
    dest = f"file://{root}/{committer_name}-{time.monotonic_ns()}"
    store = FaultInjectingStore(outcommit.open_store(dest))
    committer = outcommit.create_committer(dest, committer=committer_name, store=store)
    job = JobContext(dest, config=committer.config)
    committer.setup_job(job)
    messages = []
    task_started = time.perf_counter()
    for t in range(tasks):
        task = job.task_attempt(t)
        committer.setup_task(task)
        fs, base = committer.filesystem(task), committer.work_path(task)
        for f in range(files):
            with fs.open(f"{base}/part={f % 10}/file-{t:03d}-{f:04d}.bin", "wb") as out:
                out.write(b"x" * 1024)
        messages.append(committer.commit_task(task))
    task_commit = time.perf_counter() - task_started
    store.calls.clear()
    started = time.perf_counter()
    summary = committer.commit_job(job, messages)
    job_commit = time.perf_counter() - started
    assert summary.metrics["files.committed"] == tasks * files
    ops = dict(store.calls)
    return {"job_commit_s": job_commit, "task_phase_s": task_commit,
            "renames": ops.get("rename_file", 0) + ops.get("rename_dir", 0),
            "listings": ops.get("list_dir", 0) + ops.get("list_files", 0),
            "store_ops": sum(ops.values())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=10)
    parser.add_argument("--files", type=int, default=100, help="files per task")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    results: dict[str, list[dict[str, float]]] = {"v1": [], "v2": []}
    with tempfile.TemporaryDirectory(prefix="outcommit-bench-") as tmp:
        for _ in range(args.repeat):  # interleaved so both see the same machine state
            for name in results:
                results[name].append(run_once(name, Path(tmp), args.tasks, args.files))
    total = args.tasks * args.files
    print(f"job commit of {total} files ({args.tasks} tasks x {args.files} files of 1 KiB, "
          f"10 partition dirs) on the local filesystem, median of {args.repeat}")
    print(f"{'committer':<10} {'job commit':>12} {'task phase':>12} {'renames':>8} {'listings':>9} "
          f"{'store ops':>10}")
    medians = {}
    for name, runs in results.items():
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        medians[name] = med
        print(f"{name:<10} {med['job_commit_s'] * 1000:>10.1f}ms {med['task_phase_s'] * 1000:>10.1f}ms "
              f"{med['renames']:>8.0f} {med['listings']:>9.0f} {med['store_ops']:>10.0f}")
    ratio = medians["v1"]["job_commit_s"] / medians["v2"]["job_commit_s"]
    print(f"v1 / v2 job commit time: {ratio:.1f}x (v2 moved its files at task commit, "
          "which is why it is neither safe nor repeatable)")


if __name__ == "__main__":
    main()
