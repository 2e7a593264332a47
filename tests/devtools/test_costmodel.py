"""The cost model: exact counts on a real client, virtual time that follows real parallelism."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

import outcommit
from outcommit import JobContext
from outcommit_devtools.costmodel import CostModel, Meter, MeteredStore, attach_botocore

MODEL = CostModel(request_latency=0.1, copy_bandwidth=1_000_000)


def test_virtual_time_follows_the_executor():
    meter = Meter(MODEL)

    def request(_: int) -> None:
        meter.charge("GetObject")

    with meter.measure():
        meter.charge("HeadObject")                     # 0.1 serial
        with ThreadPoolExecutor(max_workers=4) as pool:
            list(pool.map(request, range(8)))          # 8 requests on 4 workers: 0.2
        meter.charge("CopyObject", copied=500_000)     # 0.1 + 0.5
    assert meter.modelled_seconds == pytest.approx(0.9)
    assert meter.requests == {"HeadObject": 1, "GetObject": 8, "CopyObject": 1}
    assert meter.bytes_copied == 500_000


def test_rate_limit_bounds_a_phase():
    meter = Meter(CostModel(request_latency=0.0, write_requests_per_prefix=100))
    with meter.measure():
        for _ in range(50):
            meter.charge("PutObject", prefix="bucket/table")
    assert meter.modelled_seconds == pytest.approx(0.5)


@pytest.mark.s3
def test_botocore_counts_are_exact_for_a_magic_job_commit(s3_config, s3_root):
    url = f"{s3_root}/metered"
    committer = outcommit.create_committer(url, s3_config, "magic")
    job = JobContext(url, config=committer.config)
    committer.setup_job(job)
    messages = []
    for index in range(3):
        task = job.task_attempt(index)
        committer.setup_task(task)
        for name in ("a", "b"):
            with committer.filesystem(task).open(f"{committer.work_path(task)}/{index}-{name}", "wb") as f:
                f.write(b"x" * 1000)
        messages.append(committer.commit_task(task))
    meter = Meter(MODEL)
    detach = attach_botocore(committer.store.client, meter)
    try:
        with meter.measure():
            committer.commit_job(job, messages)
    finally:
        detach()
    assert meter.requests["CompleteMultipartUpload"] == 6
    assert meter.bytes_copied == 0 and meter.requests["CopyObject"] == 0
    assert meter.total_requests <= 6 + 10
    # 6 completions on 4 threads = 2 rounds, plus the serial requests around them.
    serial = meter.total_requests - 6
    assert meter.modelled_seconds == pytest.approx((serial + 2) * 0.1, abs=1e-3)  # + _SUCCESS bytes


@pytest.mark.s3
def test_metered_store_counts_store_calls(s3_config, s3_root):
    meter = Meter(MODEL)
    store = MeteredStore(outcommit.open_store(s3_root, s3_config), meter)
    root = store.strip(s3_root)
    with meter.measure():
        store.write_bytes(f"{root}/a", b"12345")
        store.rename_file(f"{root}/a", f"{root}/b")
        mp = store.multipart()
        upload = mp.initiate(f"{root}/c")
        mp.abort(f"{root}/c", upload)
    assert meter.requests == {"write_bytes": 1, "rename_file": 1, "multipart.initiate": 1,
                              "multipart.abort": 1}
    assert meter.bytes_copied == 5 and meter.bytes_uploaded == 5
