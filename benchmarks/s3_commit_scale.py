"""Job commit of the ``magic`` committer at scale: modelled time against its limit, peak memory.

    python benchmarks/s3_commit_scale.py [--files 1000,100000] [--tasks 100] [--latency 0.03]
                                         [--connections 64] [--cpu-requests 300]

1. The client CPU of one S3 request is *measured* here: CompleteMultipartUpload through
   boto3 against a moto server running in another process (so its CPU is not counted).
2. For each job size, ``--tasks`` task commits are published through the committer
   (pendingsets of 1,000s of uploads go by reference, as Spark's messages do), then the
   driver's job commit runs with every request metered (botocore hooks, per attempt) and
   priced by the cost model (latency, measured client CPU on ``--client-cores`` cores, a
   pool of ``--connections``), printed with the limit
   ``files x latency / connections + latency`` (the ``_SUCCESS`` write) and the ratio.
3. Peak RSS of this process during job commit above its baseline just before (Linux
   ``VmHWM`` after resetting it through ``/proc/self/clear_refs``), and exact request counts.

What is real and what is not: every request goes through the committer's real boto3 client
(serialised, signed, parsed, metered). The uploads are *not* created on the server (100k
multipart uploads would take the emulator an hour): the pendingsets name uploads with ids
``bench-...``, and only their ``CompleteMultipartUpload`` requests are answered in process
by a botocore ``before-send`` hook with S3's response (no socket). Everything else (the
job marker, pendingsets, listings, ``_SUCCESS``, deletes) is answered by the moto server.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import pickle
import socket
import subprocess
import sys
import tempfile
import time
from typing import Any

import outcommit
from outcommit import JobContext
from outcommit.committers.delayed.files import PendingCommit, PendingSet
from outcommit_devtools.costmodel import CostModel, Meter, attach_botocore, measure_client_cpu
from outcommit_s3.embedded import EmbeddedS3, free_port

BUCKET = "bench"
STUB_PREFIX = "bench-"


def start_moto_process() -> tuple[EmbeddedS3, subprocess.Popen[bytes]]:
    """moto's S3 server in a child process (its CPU is not this process's)."""
    port = free_port()
    code = ("import logging; logging.getLogger('werkzeug').setLevel(logging.ERROR);"
            "from moto.server import ThreadedMotoServer; import time;"
            f"s = ThreadedMotoServer(ip_address='127.0.0.1', port={port}, verbose=False); s.start();"
            "time.sleep(10**7)")
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if time.monotonic() > deadline or process.poll() is not None:
                process.kill()
                raise RuntimeError("the moto server did not start") from None
            time.sleep(0.1)
    server = EmbeddedS3(endpoint_url=f"http://127.0.0.1:{port}", server=None, max_attempts=3)
    server.create_bucket(BUCKET)
    return server, process


def stub_completions(client: Any) -> Any:
    """Answer CompleteMultipartUpload of the benchmark's ``bench-`` uploads in process."""
    from botocore.awsrequest import AWSResponse

    class Raw:
        def __init__(self, body: bytes) -> None:
            self.body = body

        def stream(self, **_: Any) -> Any:
            yield self.body

    def before_send(request: Any, **_: Any) -> Any:
        if f"uploadId={STUB_PREFIX}" not in request.url:
            return None
        key = request.url.split("?", 1)[0].split(f"/{BUCKET}/", 1)[1]
        body = (f'<?xml version="1.0" encoding="UTF-8"?><CompleteMultipartUploadResult>'
                f"<Location>{request.url.split('?', 1)[0]}</Location><Bucket>{BUCKET}</Bucket>"
                f'<Key>{key}</Key><ETag>"{"0" * 32}-1"</ETag></CompleteMultipartUploadResult>'
                ).encode()
        return AWSResponse(request.url, 200, {"Content-Type": "application/xml",
                                              "Content-Length": str(len(body))}, Raw(body))

    client.meta.events.register("before-send.s3.CompleteMultipartUpload", before_send,
                                unique_id="outcommit-bench-stub")
    return lambda: client.meta.events.unregister("before-send.s3.CompleteMultipartUpload",
                                                 unique_id="outcommit-bench-stub")


def rss_kb(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM to the current RSS (Linux >= 4.0)
        return True
    except OSError:
        return False


def prepare(url: str, config: dict[str, Any], files: int, tasks: int) -> tuple[Any, JobContext, list]:
    """Set up a job and publish ``tasks`` task commits naming ``files`` uploads in all."""
    committer = outcommit.create_committer(url, config, "magic")
    job = JobContext(url, config=committer.config)
    committer.setup_job(job)
    dest = committer.dest
    bucket, _, prefix = dest.partition("/")
    per_task = -(-files // tasks)
    messages = []
    made = 0
    for index in range(tasks):
        count = min(per_task, files - made)
        if count <= 0:
            break
        task = job.task_attempt(index)
        commits = [PendingCommit(bucket=bucket, key=f"{prefix}/date=2026-01-{i % 28 + 1:02d}/"
                                 f"part-{index:05d}-{i:06d}.parquet",
                                 upload_id=f"{STUB_PREFIX}{index:05d}-{i:06d}-{'u' * 40}",
                                 etags=(f"{index:08x}{i:024x}",), length=4096, job_id=job.job_id,
                                 task_id=task.task_id)
                   for i in range(count)]
        made += count
        pendingset = PendingSet(job_id=job.job_id, task_id=task.task_id, attempt_id=task.attempt_id,
                                commits=commits, committer="magic")
        messages.append(committer.publish_task(task, pendingset))
    return committer, job, messages


def commit_in_child(url: str, config: dict[str, Any], job_id: str, messages: list,
                    model: CostModel) -> dict[str, Any]:
    """The driver's job commit in a fresh process: its memory is the commit's alone."""
    with tempfile.NamedTemporaryFile(suffix=".pickle", delete=False) as f:
        pickle.dump({"url": url, "config": config, "job_id": job_id, "messages": messages,
                     "model": model}, f)
    try:
        done = subprocess.run([sys.executable, __file__, "--child", f.name], capture_output=True,
                              text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"job commit failed:\n{done.stderr[-3000:]}")
        result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        return result
    finally:
        os.unlink(f.name)


def child(path: str) -> None:
    with open(path, "rb") as f:
        given = pickle.load(f)
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("outcommit").setLevel(logging.ERROR)
    committer = outcommit.create_committer(given["url"], given["config"], "magic")
    job = JobContext(given["url"], job_id=given["job_id"], config=committer.config)
    messages = given["messages"]
    client = committer.store.client
    unstub = stub_completions(client)
    meter = Meter(given["model"])
    detach = attach_botocore(client, meter)
    committer.store.exists(committer.store.join(committer.dest, "_SUCCESS"))  # client warm, unmetered
    gc.collect()
    baseline = rss_kb("VmRSS")
    peak_reset = reset_peak()
    try:
        with meter.measure():
            committer.commit_job(job, messages)
    finally:
        detach()
        unstub()
    peak = rss_kb("VmHWM")
    if not committer.store.exists(committer.store.join(committer.dest, "_SUCCESS")):
        raise RuntimeError("no _SUCCESS after job commit")
    print(json.dumps({"threads": committer.threads, "requests": dict(meter.requests),
                      "total_requests": meter.total_requests, "modelled": meter.modelled_seconds,
                      "wall": meter.wall_seconds, "cpu_bound": meter.cpu_bound(),
                      "baseline_kb": baseline, "peak_kb": peak, "peak_reset": peak_reset}))


def run(files: int, tasks: int, server: EmbeddedS3, model: CostModel) -> dict[str, Any]:
    url = f"s3://{BUCKET}/scale-{files}-{time.monotonic_ns()}"
    config = {**server.config, "outcommit.s3.connection.maximum": str(model.connections)}
    _committer, job, messages = prepare(url, config, files, tasks)
    result = commit_in_child(url, config, job.job_id, messages, model)
    result.update(files=files, tasks=len(messages))
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", default="1000,100000", help="job sizes, comma-separated")
    parser.add_argument("--tasks", type=int, default=100, help="tasks per job")
    parser.add_argument("--latency", type=float, default=0.030, help="seconds per request")
    parser.add_argument("--connections", type=int, default=64, help="HTTP connection pool")
    parser.add_argument("--client-cores", type=int, default=1,
                        help="CPU lanes of the driver's requests (one Python process: 1)")
    parser.add_argument("--cpu-requests", type=int, default=300,
                        help="requests timed to measure the client CPU per request")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child)
        return 0
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("outcommit").setLevel(logging.ERROR)  # the sweep's notes, 100k progress lines

    server, process = start_moto_process()
    try:
        cpu = measure_client_cpu(server.client(), BUCKET, requests=args.cpu_requests)
        print(f"client CPU per request (CompleteMultipartUpload, boto3, moto in another process, "
              f"{args.cpu_requests} requests): {cpu * 1000:.2f} ms")
        latency = CostModel(request_latency=args.latency, connections=args.connections)
        models = {"latency only": latency,
                  "latency + client CPU": CostModel(request_latency=args.latency,
                                                    connections=args.connections,
                                                    client_cpu_per_request=cpu,
                                                    client_cores=args.client_cores)}
        for label, model in models.items():
            print(f"cost model ({label}):", ", ".join(f"{k}={v}" for k, v in model.describe().items()
                                                      if k in ("request_latency", "client_cpu_per_request",
                                                               "client_cores", "connections")))
        print()
        rows = []
        for files in (int(f) for f in args.files.split(",")):
            for label, model in models.items():
                started = time.perf_counter()
                result = run(files, args.tasks, server, model)
                result["label"], result["model"] = label, model
                result["elapsed"] = time.perf_counter() - started
                rows.append(result)
                print(f"  ran {files} files ({label}): modelled {result['modelled']:.2f} s, "
                      f"wall {result['wall']:.1f} s", flush=True)
    finally:
        process.kill()
        process.wait()

    print()
    header = (f"{'files':>7}{'tasks':>6}{'threads':>8}  {'model':<21}{'requests':>9}{'extra':>6}"
              f"{'modelled s':>11}{'limit s':>9}{'ratio':>7}{'cpu-bound s':>12}{'RSS +MB':>9}")
    print(header)
    print("-" * len(header))
    checks = []
    for r in rows:
        model: CostModel = r["model"]
        total, extra = r["total_requests"], r["total_requests"] - r["files"]
        limit = model.connection_bound(r["files"], serial=1)
        ratio = r["modelled"] / limit
        delta_mb = (r["peak_kb"] - r["baseline_kb"]) / 1024
        print(f"{r['files']:>7}{r['tasks']:>6}{r['threads']:>8}  {r['label']:<21}{total:>9}"
              f"{extra:>6}{r['modelled']:>11.2f}{limit:>9.2f}{ratio:>7.2f}"
              f"{r['cpu_bound']:>12.2f}{delta_mb:>9.1f}")
        if r["label"] == "latency only":
            checks.append((f"{r['files']} files: modelled job commit <= 1.1x the connection-bound limit "
                           "(latency only)", ratio <= 1.1, f"{ratio:.3f}x"))
        checks.append((f"{r['files']} files ({r['label']}): requests = files + small constant",
                       extra <= 2 * r["tasks"] + 20, f"{total} = {r['files']} + {extra}"))
        if r["peak_reset"]:
            checks.append((f"{r['files']} files ({r['label']}): driver peak RSS < 150 MB above baseline",
                           delta_mb < 150, f"baseline {r['baseline_kb'] / 1024:.1f} MB, peak "
                           f"{r['peak_kb'] / 1024:.1f} MB, +{delta_mb:.1f} MB"))
    print()
    for r in rows:
        by_operation = dict(sorted(r["requests"].items()))
        print(f"{r['files']} files ({r['label']}) requests by operation: {by_operation}")
    print()
    for label, ok, detail in checks:
        print(f"[{'ok' if ok else 'MISSED'}] {label}: {detail}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
