"""Deleting many files: what sending requests at once gains, batch by batch or file by file.

    python benchmarks/delete_files.py [--files 100000] [--single 10000] [--partitions 1000]
                                      [--latency 0.03]

A ``replace`` job commit deletes the files already in its destination before the first
completion (every second of it is job commit): the delayed committers through
``Store.delete_files`` (which also deletes a magic task's ``.pending`` files, and on S3 the
job's state), the rename committers through ``conflictmodes.replace_destination``:

* S3 (the moto server, in another process, over HTTP): one DeleteObjects per 1,000 keys,
  sent one after another. Every HTTP request is metered by botocore hooks and priced on
  the cost model's virtual clock, which follows the threads that really ran; S3 counts
  each deleted key as one write against a prefix's 3,500 writes/s, so the model does too.
  The same batches sent all at once (the benchmark's own 64 threads, not used by the
  store) show why the store keeps them in series: the prefix's write rate bounds both,
  and overlapping them gains nothing.
  The keys do not exist (S3 deletes a missing key without error).
* A store without batch deletes (the memory store, metered per call, standing for the Azure
  store today): one request per file, ``threads`` at once, against the
  same requests one after another (what ``delete_files`` did before, same run).
* ``replace`` by the rename committers (``manifest``, ``v1``/``v2``): one listing of the
  destination (which directories hold another job's state), then every partition
  directory deleted recursively (a listing and a delete each, on a store without batch
  deletes), ``outcommit.committer.threads`` at once, against the same requests one after
  another (``replace_destination`` with one thread, same run).
"""

from __future__ import annotations

import argparse
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import outcommit
from outcommit import JobContext, conflictmodes
from outcommit.testing.faults import stop_process
from outcommit_devtools.costmodel import CostModel, Meter, MeteredStore, attach_botocore
from s3_commit_scale import BUCKET, start_moto_process


def figures(meter: Meter) -> dict[str, Any]:
    """A measured phase: its requests, and the two bounds its modelled time is the larger of."""
    return {**meter.summary(), "rate_bound": meter.rate_bound(), "latency_bound": meter.now()}


def s3_case(files: int, model: CostModel) -> dict[str, Any]:
    server, process = start_moto_process()
    try:
        store = outcommit.open_store(f"s3://{BUCKET}/table", server.config)
        paths = [f"{BUCKET}/table/part-{i:06d}.parquet" for i in range(files)]
        rows = {}
        for name, delete in (("delete_files", lambda: store.delete_files(paths)),
                             ("all at once", lambda: batches_at_once(store, paths))):
            meter = Meter(model)
            detach = attach_botocore(store.client, meter)
            try:
                with meter.measure():
                    delete()
            finally:
                detach()
            rows[name] = figures(meter)
        return rows
    finally:
        stop_process(process)


def batches_at_once(store: Any, paths: list[str]) -> None:
    batches = [paths[start:start + 1000] for start in range(0, len(paths), 1000)]
    with ThreadPoolExecutor(64) as pool:
        list(pool.map(store.delete_many, batches))  # one batch: one request


def single_case(files: int, model: CostModel) -> dict[str, Any]:
    rows = {}
    for name in ("one after another", "delete_files"):
        root = f"/delete-bench-{name.replace(' ', '-')}/table"
        inner = outcommit.open_store(f"memory:/{root}")
        paths = [f"{root}/part-{i:06d}" for i in range(files)]
        for path in paths:
            inner.write_bytes(path, b"x")
        meter = Meter(model)
        store = MeteredStore(inner, meter)
        with meter.measure():
            if name == "delete_files":
                store.delete_files(paths)
            else:
                for path in paths:
                    store.delete(path)
        assert not inner.list_files(root)
        rows[name] = figures(meter)
    rows["parallelism"] = store.parallelism
    return rows


def replace_case(partitions: int, model: CostModel) -> dict[str, Any]:
    """Conflict mode ``replace`` of a destination of ``partitions`` directories (one file
    each) by the ``manifest`` committer on a store without batch deletes."""
    rows: dict[str, Any] = {}
    for name in ("one after another", "replace_destination"):
        dest = f"memory://replace-bench-{name.replace(' ', '-')}/table"
        inner = outcommit.open_store(dest)
        root = inner.strip(dest)
        for index in range(partitions):
            inner.write_bytes(f"{root}/day={index:05d}/part-0.parquet", b"x")
        meter = Meter(model)
        store = MeteredStore(inner, meter)
        serial = {"outcommit.committer.threads": "1"} if name == "one after another" else {}
        committer = outcommit.create_committer(dest, {"outcommit.committer.conflict-mode": "replace",
                                                      **serial}, "manifest", store=store)
        with meter.measure():
            conflictmodes.replace_destination(committer, JobContext(dest))
        assert not inner.list_files(root)
        rows[name] = figures(meter)
        rows["parallelism"] = committer.threads
    return rows


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=positive, default=100_000, help="files deleted on S3 (batches)")
    parser.add_argument("--single", type=positive, default=10_000, help="files deleted one request each")
    parser.add_argument("--partitions", type=positive, default=1_000,
                        help="partition directories replaced (one file each)")
    parser.add_argument("--latency", type=float, default=0.03, help="seconds per request")
    args = parser.parse_args(argv)
    model = CostModel(request_latency=args.latency)
    print(f"cost model: {model.describe()}")
    print(f"\n{'store':38s} {'files':>8s} {'sent':18s} {'requests':>9s} {'latency s':>10s} "
          f"{'rate s':>8s} {'modelled s':>11s} {'ratio':>7s}")
    ok = True
    for label, files, case, base in (("s3 (DeleteObjects, moto)", args.files, s3_case, "delete_files"),
                                     ("no batch delete (memory, metered)", args.single, single_case,
                                      "one after another"),
                                     ("replace, partitions (memory, metered)", args.partitions,
                                      replace_case, "one after another")):
        rows = case(files, model)
        names = [n for n in rows if n != "parallelism"]
        for name in names:
            row = rows[name]
            ratio = row["modelled_seconds"] / rows[base]["modelled_seconds"]
            print(f"{label:38s} {files:8,d} {name:18s} {row['total_requests']:9,d} "
                  f"{row['latency_bound']:10.2f} {row['rate_bound']:8.2f} {row['modelled_seconds']:11.2f} "
                  f"{ratio:6.3f}x")
        same = all(rows[n]["requests"] == rows[names[0]]["requests"] for n in names)
        ok &= same
        extra = f", {rows['parallelism']} at once" if "parallelism" in rows else ""
        print(f"{'':38s} requests by operation: {rows[names[0]]['requests']} "
              f"({'the same' if same else 'NOT the same'} both ways{extra})")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
