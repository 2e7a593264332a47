"""Azure and GCS at the physical limit: job commit against one request per file ÷ connections.

For each size (default 1,000 and 100,000 files, 100 per task) a real job is written and
committed, the store operations of its job commit recorded exactly, mapped to the
requests the real store issues, and priced (``manifest_commit.py``'s profiles, printed):

* GCS, ``manifest`` renaming by ``objects.move``: one request per file, nothing copied;
  the store's rename probe (2 uploads, 1 move, 2 deletes, once per store) is added;
* Azure Blob, ``blocklist``: one Put Block List per file, nothing copied;
* Azure HNS, ``manifest``: one rename per file;
* for comparison, ``manifest`` renaming by copy + delete on GCS and Blob (what the
  emulators here force, and what it cost before).

The physical limit of a job commit is one request per file over the connections, plus
the unavoidable ``_SUCCESS`` write. ``manifest`` jobs run on ``file://`` (the operations
a committer issues do not depend on the store it runs on; the memory store's listings
are O(files) per call and do not scale to 100k). ``blocklist`` runs on Azurite up to
``--azurite-max`` files; above that its operation log is *extrapolated* from runs at two
sizes, after checking that each file costs exactly one operation and the rest is the
same at both sizes (printed).

    python benchmarks/azure_gcs_commit.py [--files 1000 100000] [--threads 16] [--azurite-max 1000]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from manifest_commit import PROFILES, WORKER_PREFIX, Profile, cost_ms, model, run_job

FILES_PER_TASK = 100
WORKERS = (WORKER_PREFIX, "outcommit-complete")
Log = list[tuple[str, str, tuple[int, ...]]]

GCS, BLOB, HNS = (next(p for p in PROFILES if p.name == n) for n in ("gcs", "azure-blob", "azure-hns"))
GCS_MOVE = Profile("gcs, objects.move", GCS.latency_ms, GCS.copy_mb_s, False, GCS.batch_delete)
#: The GCS store's rename probe on a server with objects.move: put a, put b, move a->b
#: refused (412), delete a, delete b; serial, once per store, at the first rename.
GCS_PROBE: Log = [("write_bytes", "probe", ()), ("write_bytes", "probe", ()),
                  ("rename_file", "probe", (0,)), ("delete", "probe", ()), ("delete", "probe", ())]


def manifest_log(files: int, threads: int, size: int) -> tuple[Log, float]:
    directory = tempfile.mkdtemp(prefix="outcommit-bench-")
    try:
        started = time.perf_counter()
        store, _, _ = run_job(f"file://{directory}/table", {}, "manifest", files // FILES_PER_TASK,
                              FILES_PER_TASK, size, threads)
        return list(store.log), time.perf_counter() - started
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def with_probe(log: Log) -> Log:
    """The GCS probe inserted before the first rename (where the store runs it)."""
    first = next(i for i, (op, _, _) in enumerate(log) if op == "rename_file")
    return log[:first] + GCS_PROBE + log[first:]


def blocklist_logs(sizes: list[int], threads: int, size: int, azurite_max: int) -> dict[int, Log]:
    """Job commit logs of blocklist on Azurite; sizes above ``azurite_max`` extrapolated."""
    from outcommit_azure.emulator import start_azurite

    small = max(FILES_PER_TASK, azurite_max // 5 // FILES_PER_TASK * FILES_PER_TASK)
    measured = sorted({n for n in sizes if n <= azurite_max} | {small, azurite_max})
    logs: dict[int, Log] = {}
    server = start_azurite()
    try:
        server.create_container("bench")
        for n in measured:
            started = time.perf_counter()
            store, _, _ = run_job(f"abfs://bench/{uuid.uuid4().hex}/table", server.config(), "blocklist",
                                  n // FILES_PER_TASK, FILES_PER_TASK, size, threads)
            logs[n] = list(store.log)
            print(f"  blocklist on Azurite, {n:,} files: {time.perf_counter() - started:.0f} s; job commit "
                  f"operations: {dict(Counter(op for op, _, _ in logs[n]))}")
    finally:
        server.stop()
    large = measured[-1]
    per_file = {op for op, _, _ in logs[large]} - {"blocklist.complete"}
    rest = [Counter(op for op, _, _ in logs[n] if op != "blocklist.complete") for n in (small, large)]
    completes = [sum(op == "blocklist.complete" for op, _, _ in logs[n]) for n in (small, large)]
    linear = rest[0] == rest[1] and completes == [small, large]
    print(f"  per file: exactly 1 blocklist.complete ({completes[0]:,} at {small:,}, {completes[1]:,} at "
          f"{large:,}); per job: the same {sum(rest[1].values())} operations ({', '.join(sorted(per_file))}) "
          f"at both sizes: {'yes' if linear else 'NO'}")
    for n in sizes:
        if n in logs:
            continue
        if not linear:
            raise SystemExit(f"cannot extrapolate blocklist to {n:,} files: the logs are not linear")
        log = logs[large]
        first = next(i for i, (op, _, _) in enumerate(log) if op == "blocklist.complete")
        worker = log[first][1]
        others = [entry for entry in log if entry[0] != "blocklist.complete"]
        logs[n] = others[:first] + [("blocklist.complete", worker, ())] * n + others[first:]
        print(f"  blocklist, {n:,} files: extrapolated from the run at {large:,} files")
    return logs


def report(label: str, log: Log, profile: Profile, threads: int, per_file: str) -> bool:
    result = model(log, profile, threads, WORKERS)
    files = sum(op in ("rename_file", "blocklist.complete") and thread != "probe" for op, thread, _ in log)
    limit = files * cost_ms(per_file, 0, profile) / threads + cost_ms("write", 0, profile)
    ratio = result["time_ms"] / limit
    requests = result["requests"]
    print(f"  {label:40s} {result['time_ms'] / 1000:9.2f} s modelled; physical limit {limit / 1000:9.2f} s; "
          f"{ratio:.3f}x; {sum(requests.values()):7,d} requests "
          f"({', '.join(f'{k} {v:,}' for k, v in sorted(requests.items()))}); "
          f"{result['bytes_copied']:,} bytes copied")
    return ratio <= 1.2 and result["bytes_copied"] == 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, nargs="+", default=[1000, 100_000])
    parser.add_argument("--threads", type=int, default=16, help="connections (the committer's threads)")
    parser.add_argument("--size", type=int, default=4096, help="bytes per file (prices copies)")
    parser.add_argument("--azurite-max", type=int, default=1000,
                        help="largest blocklist job run on Azurite; larger ones are extrapolated")
    args = parser.parse_args()
    if any(n % FILES_PER_TASK for n in args.files):
        parser.error(f"--files must be multiples of {FILES_PER_TASK}")
    print(f"job commit of N files ({FILES_PER_TASK} per task, {args.size} bytes each), "
          f"{args.threads} connections; physical limit = N x (one request) / {args.threads} + _SUCCESS")
    for profile in (GCS, BLOB, HNS):
        print(f"  [{profile.describe()}]")
    print("\nrecording")
    manifests = {}
    for n in args.files:
        manifests[n], took = manifest_log(n, args.threads, args.size)
        print(f"  manifest on file://, {n:,} files: {took:.0f} s")
    blocklists = blocklist_logs(args.files, args.threads, args.size, args.azurite_max)
    ok = True
    for n in args.files:
        print(f"\n{n:,} files")
        gcs_log = with_probe(manifests[n])
        ok &= report("GCS: manifest, objects.move", gcs_log, GCS_MOVE, args.threads, "rename")
        ok &= report("Azure Blob: blocklist", blocklists[n], BLOB, args.threads, "write")
        ok &= report("Azure HNS: manifest (rename)", manifests[n], HNS, args.threads, "rename")
        report("(before) GCS: manifest, rewrite+delete", manifests[n], GCS, args.threads, "rename")
        report("(before) Blob: manifest, copy+delete", manifests[n], BLOB, args.threads, "rename")
    verdict = "met" if ok else "NOT met"
    print(f"\ntargets (GCS, Blob, HNS: <= 1.2x the physical limit, 0 bytes copied) {verdict}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
