"""Job commit of 50 tasks x 20 small files: ``manifest`` vs ``v1``, priced for GCS and Azure.

Emulators' wall time says little about a real store (ENVIRONMENT.md), so the figures that
matter are exact: store operations recorded during job commit, mapped to the requests the
real store makes for each (GCS: rewrite + delete per file rename; Azure Blob: Copy Blob +
delete; Azure HNS: one rename), bytes copied server-side, and a modelled time from
per-request latency plus copy bandwidth (parameters printed). Parallel stages are
scheduled over the committer's threads. ``v1`` is forced (allow_unsafe) where it is unsafe.
A real-time run on Azurite and the GCS emulator is printed as a sanity check.

A small adapter here records operations and maps each to the requests the real store
issues (a rename is two requests and a byte copy on GCS/Blob, one on HNS; a recursive
delete is a list plus batches). ``outcommit_devtools.costmodel.MeteredStore`` charges one
request per store call, which would undercount copy-based renames, so it is not used here.

    python benchmarks/manifest_commit.py [--tasks 50] [--files 20] [--size 4096] [--no-emulators]
"""

from __future__ import annotations

import argparse
import heapq
import math
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from outcommit import JobContext, create_committer, open_store
from outcommit.store import Store
from outcommit.testing.faults import FaultInjectingStore

WORKER_PREFIX = "outcommit-manifest"
#: A thread whose requests run beside the main thread's next one (the sources' listing,
#: beside the check for a publish journal).
BESIDE_PREFIX = "outcommit-sources"


@dataclass(frozen=True)
class Profile:
    """Per-request latency (ms) by request kind, server-side copy bandwidth, rename style."""

    name: str
    latency_ms: dict[str, float]
    copy_mb_s: float
    copy_rename: bool
    batch_delete: int
    #: No directories (GCS, Blob): an empty directory costs nothing to remove.
    flat: bool = True
    #: Entries per page of a listing (GCS 1,000, Azure 5,000): pages are requested one
    #: after another, each with the last one's continuation token.
    list_page: int = 1000

    def describe(self) -> str:
        lat = ", ".join(f"{k} {v:g} ms" for k, v in self.latency_ms.items())
        how = f"rename = copy ({self.copy_mb_s:g} MB/s) + delete" if self.copy_rename else \
            "rename = 1 request, no bytes copied"
        return (f"{self.name}: {lat}; {how}; listing pages of {self.list_page:,}; recursive delete "
                f"= list + batches of {self.batch_delete}")


PROFILES = [
    Profile("gcs", {"read": 30, "write": 45, "list": 35, "copy": 40, "delete": 25, "rename": 40},
            100, True, 100),
    Profile("azure-blob", {"read": 20, "write": 30, "list": 25, "copy": 30, "delete": 20, "rename": 30},
            200, True, 256, list_page=5000),
    Profile("azure-hns", {"read": 20, "write": 30, "list": 25, "copy": 30, "delete": 20, "rename": 25},
            200, False, 256, flat=False, list_page=5000),
]


class RecordingStore(FaultInjectingStore):
    """Records each store operation with its thread and the sizes a real store would move."""

    def __init__(self, inner: Store) -> None:
        super().__init__(inner)
        self.log: list[tuple[str, str, tuple[int, ...]]] = []
        self.recording = False

    def call(self, operation: str, target: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if self.recording and operation in ("list_dir", "list_files"):
            # Recorded with the entries it returned: a real store pages through them.
            found = super().call(operation, target, *args, **kwargs)
            with self._lock:
                self.log.append((operation, threading.current_thread().name, (len(found),)))
            return found
        if self.recording:
            sizes: tuple[int, ...] = ()
            if operation == "rename_file":
                info = self.inner.info(args[0])
                sizes = (info.size if info else 0,)
            elif operation == "rename_dir" or (operation == "delete" and
                                                (kwargs.get("recursive") or args[1:2] == (True,))):
                sizes = tuple(f.size for f in self.inner.list_files(args[0]))
            with self._lock:
                self.log.append((operation, threading.current_thread().name, sizes))
        return super().call(operation, target, *args, **kwargs)


def requests_for(operation: str, sizes: tuple[int, ...], profile: Profile) -> list[tuple[str, int]]:
    """The (request kind, bytes copied) a real store issues for one store operation."""
    if operation in ("info", "read_bytes", "load_json", "open"):
        return [("read", 0)]
    if operation in ("list_dir", "list_files"):  # sizes: (entries listed,)
        return [("list", 0)] * _pages(sizes[0] if sizes else 0, profile)
    if operation in ("write_bytes", "save_json", "write_atomic", "create_exclusive"):
        return [("write", 0)]
    if operation == "mkdirs":
        return []  # no directories on these stores: the stores spend no request
    if operation == "delete_empty_dir":
        # Flat namespaces have no empty directory to remove; a hierarchical one deletes it.
        return [] if profile.flat else [("delete", 0)]
    if operation == "rename_file":
        return [("copy", sizes[0]), ("delete", 0)] if profile.copy_rename else [("rename", 0)]
    if operation == "rename_dir":
        if not profile.copy_rename:
            return [("rename", 0)]
        return [("list", 0)] * _pages(len(sizes), profile) + \
            [r for s in sizes for r in (("copy", s), ("delete", 0))]
    if operation == "delete":
        if sizes:
            return [("list", 0)] * _pages(len(sizes), profile) + \
                [("delete", 0)] * math.ceil(len(sizes) / profile.batch_delete)
        return [("delete", 0)]
    # Block lists (Azure Blob): the upload id is made by the client; abort sends nothing.
    if operation == "blocklist.complete":
        return [("write", 0)]  # one Put Block List
    if operation == "blocklist.upload_part":
        return [("write", 0)]
    if operation in ("blocklist.initiate", "blocklist.abort"):
        return []
    if operation == "blocklist.list_pending":
        return [("list", 0), ("list", 0)]  # with and without uncommitted blobs
    if operation == "blocklist.check_parts":
        return []
    raise ValueError(f"no request mapping for {operation}")


def _pages(entries: int, profile: Profile) -> int:
    return max(1, math.ceil(entries / profile.list_page))


def cost_ms(kind: str, copied: int, profile: Profile) -> float:
    return profile.latency_ms[kind] + (copied / (profile.copy_mb_s * 1e6) * 1000 if copied else 0.0)


def model(log: list[tuple[str, str, tuple[int, ...]]], profile: Profile, threads: int,
          workers: tuple[str, ...] = (WORKER_PREFIX,)) -> dict[str, Any]:
    """Requests, bytes and modelled time; worker-thread runs are scheduled over ``threads``."""
    requests: Counter[str] = Counter()
    copied = 0
    total = 0.0
    elapsed = 0.0
    batch: list[float] = []

    def flush() -> float:
        if not batch:
            return 0.0
        workers = [0.0] * max(1, min(threads, len(batch)))
        for cost in batch:  # list scheduling in log order onto the least-loaded worker
            heapq.heapreplace(workers, workers[0] + cost)
        batch.clear()
        return max(workers)

    beside = 0.0  # requests of a BESIDE_PREFIX thread, overlapping the next serial one
    for operation, thread, sizes in log:
        op_cost = 0.0
        for kind, nbytes in requests_for(operation, sizes, profile):
            requests[kind] += 1
            copied += nbytes
            op_cost += cost_ms(kind, nbytes, profile)
        total += op_cost
        if thread.startswith(workers):
            batch.append(op_cost)
        elif thread.startswith(BESIDE_PREFIX):
            beside += op_cost
        else:
            elapsed += flush() + max(op_cost, beside)
            beside = 0.0
    elapsed += flush() + beside
    return {"requests": requests, "bytes_copied": copied, "time_ms": elapsed,
            "limit_ms": total / threads}


def run_job(url: str, config: dict[str, str], committer_name: str, tasks: int, files: int,
            size: int, threads: int) -> tuple[RecordingStore, float, dict[str, int]]:
    """Write and commit the tasks, then record and time the job commit only."""
    cfg = {**config, "outcommit.committer.threads": str(threads)}
    store = RecordingStore(open_store(url, cfg))
    committer = create_committer(url, cfg, committer_name, store=store, allow_unsafe=True)
    job = JobContext(url, config=committer.config)
    committer.setup_job(job)
    payload = b"x" * size
    messages = []
    for index in range(tasks):
        task = job.task_attempt(index)
        committer.setup_task(task)
        fs, base = committer.filesystem(task), committer.work_path(task)
        for i in range(files):
            with fs.open(f"{base}/part-{index:05d}-{i:03d}.parquet", "wb") as f:
                f.write(payload)
        messages.append(committer.commit_task(task))
    store.recording = True
    started = time.perf_counter()
    summary = committer.commit_job(job, messages)
    wall = time.perf_counter() - started
    store.recording = False
    assert summary.metrics["files.committed"] == tasks * files
    return store, wall, dict(store.calls)


def modelled(args: argparse.Namespace) -> bool:
    print(f"job: {args.tasks} tasks x {args.files} files of {args.size} bytes; job commit only")
    runs = {}
    for name, threads in (("v1", 1), ("manifest", 1), ("manifest", 16)):
        url = f"memory:///bench-{uuid.uuid4().hex}/table"
        store, _, _ = run_job(url, {}, name, args.tasks, args.files, args.size, threads)
        runs[(name, threads)] = store.log
        ops = Counter(op for op, _, _ in store.log)
        print(f"  store operations, {name} ({threads} thread{'s' if threads > 1 else ''}): "
              + ", ".join(f"{k} {v}" for k, v in sorted(ops.items())))
    ok = True
    for profile in PROFILES:
        print(f"\n[{profile.describe()}]")
        v1 = model(runs[("v1", 1)], profile, 1)
        m1 = model(runs[("manifest", 1)], profile, 1)
        m16 = model(runs[("manifest", 16)], profile, 16)
        for label, result in (("v1 (forced)", v1), ("manifest, 1 thread", m1), ("manifest, 16 threads", m16)):
            reqs = ", ".join(f"{k} {v}" for k, v in sorted(result["requests"].items()))
            print(f"  {label:22s} {result['time_ms'] / 1000:8.2f} s modelled; "
                  f"{sum(result['requests'].values()):5d} requests ({reqs}); "
                  f"{result['bytes_copied']:,} bytes copied")
        speedup = v1["time_ms"] / m16["time_ms"]
        vs_limit = m16["time_ms"] / m16["limit_ms"]
        print(f"  manifest@16 vs v1: {speedup:.1f}x faster (target >= 3x); "
              f"manifest@1 vs @16: {m1['time_ms'] / m16['time_ms']:.1f}x; "
              f"manifest@16 / request-bound limit (all requests / 16): {vs_limit:.2f} (target <= 1.5)")
        ok = ok and speedup >= 3 and vs_limit <= 1.5
    return ok


def emulators(args: argparse.Namespace) -> None:
    print("\nreal time on emulators (sanity check only; a local emulator is not a cloud store)")
    launchers: list[tuple[str, Callable[[], Any]]] = []
    try:
        from outcommit_gcs.emulator import start_gcs_emulator

        def gcs() -> Any:
            emulator = start_gcs_emulator()
            emulator.create_bucket("bench")
            return emulator, "gs://bench", emulator.config()

        launchers.append(("GCS emulator", gcs))
    except ImportError:
        print("  outcommit-gcs not installed: skipped")
    try:
        from outcommit_azure.emulator import start_azurite

        def azure() -> Any:
            server = start_azurite()
            server.create_container("bench")
            return server, "abfs://bench", server.config()

        launchers.append(("Azurite", azure))
    except ImportError:
        print("  outcommit-azure not installed: skipped")
    for label, launch in launchers:
        server, root, config = launch()
        try:
            for name, threads in (("v1", 1), ("manifest", 1), ("manifest", 16)):
                url = f"{root}/{uuid.uuid4().hex}/table"
                _, wall, calls = run_job(url, config, name, args.emu_tasks, args.files, args.size, threads)
                print(f"  {label}: {name:8s} {threads:2d} thread(s): job commit {wall:6.2f} s "
                      f"({args.emu_tasks} tasks; store ops of the whole job: "
                      f"rename_file {calls.get('rename_file', 0)}, "
                      f"rename_dir {calls.get('rename_dir', 0)}, info {calls.get('info', 0)})")
        finally:
            server.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=50)
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--emu-tasks", type=int, default=10, help="tasks for the emulator runs")
    parser.add_argument("--no-emulators", action="store_true")
    args = parser.parse_args()
    ok = modelled(args)
    if not args.no_emulators:
        emulators(args)
    print(f"\ntargets {'met' if ok else 'NOT met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
