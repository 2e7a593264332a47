"""The cost model: exact counts on a real client, virtual time that follows real parallelism.

The scheduler's cases are small enough to compute by hand (each comment shows how); the
last one is large enough that a quadratic scheduler would not finish it.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import pytest

import outcommit
from outcommit import JobContext
from outcommit.parallel import run_all
from outcommit_devtools.costmodel import (
    CostModel,
    Meter,
    MeteredStore,
    attach_botocore,
    measure_client_cpu,
    metered_job_commit,
)

MODEL = CostModel(request_latency=0.1, copy_bandwidth=1_000_000)
UNIT = CostModel(request_latency=1.0)  # one request = one second: schedules read as integers


def requests(meter: Meter, count: int) -> None:
    for _ in range(count):
        meter.charge("GetObject")


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


def test_list_scheduling_in_submit_order_onto_the_first_free_worker():
    meter = Meter(UNIT)
    with meter.measure(), ThreadPoolExecutor(max_workers=2) as pool:
        futures = [pool.submit(requests, meter, n) for n in (3, 1, 1, 1, 2)]
        ends = []
        for future in futures:
            future.result()
            ends.append(meter.now())
    # worker A: task0 0-3; worker B: task1 0-1, task2 1-2, task3 2-3; task4 at 3 (both free) -> 5
    assert ends == [3.0, 3.0, 3.0, 3.0, 5.0]
    assert meter.modelled_seconds == 5.0


def test_a_task_starts_no_earlier_than_its_submitter_submitted_it():
    meter = Meter(UNIT)
    with meter.measure():
        with ThreadPoolExecutor(max_workers=4) as pool:
            first = pool.submit(requests, meter, 1)            # submitted at 0: 0-1
            requests(meter, 2)                                  # the caller: 0-2
            second = pool.submit(requests, meter, 1)           # submitted at 2: 2-3
            first.result()
            assert meter.now() == 2.0                           # already past task 1's end
            second.result()
            assert meter.now() == 3.0
        requests(meter, 1)                                      # serial after the pool: 3-4
    assert meter.modelled_seconds == 4.0


def test_the_windowed_parallel_helper_is_modelled_round_by_round():
    meter = Meter(UNIT)
    with meter.measure():
        # 10 items, 4 threads, at most 8 submitted ahead: items 9 and 10 are submitted when
        # item 1's result is taken (at 1), and run when workers free up (at 2): 2-3.
        run_all(lambda _item: requests(meter, 1), range(10), 4)
    assert meter.modelled_seconds == 3.0 == math.ceil(10 / 4)


def test_connections_bound_the_workers_of_any_executor():
    meter = Meter(CostModel(request_latency=1.0, connections=2))
    with meter.measure(), ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(lambda _i: requests(meter, 1), range(4)))
    assert meter.modelled_seconds == 2.0  # 4 requests on 2 connections, not 8 threads


@pytest.mark.parametrize(("cores", "expected"), [(1, 0.4), (2, 0.2)])
def test_client_cpu_queues_on_the_cores(cores, expected):
    model = CostModel(request_latency=0.1, client_cpu_per_request=0.05, client_cores=cores)
    meter = Meter(model)
    with meter.measure(), ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(lambda _i: requests(meter, 1), range(8)))
    # Each request 0.1 latency + 0.05 CPU = 0.15 on its own worker, but the 8 requests'
    # CPU runs one core at a time: 8 x 0.05 = 0.4 on one core, 0.2 on two.
    assert meter.modelled_seconds == pytest.approx(expected)
    assert meter.cpu_bound() == pytest.approx(expected)


def test_client_cpu_is_paid_by_serial_requests():
    meter = Meter(CostModel(request_latency=0.1, client_cpu_per_request=0.02))
    with meter.measure():
        requests(meter, 3)
    assert meter.modelled_seconds == pytest.approx(0.36)


def test_a_failed_task_is_charged_too():
    meter = Meter(UNIT)

    def fails() -> None:
        requests(meter, 2)
        raise OSError("refused")

    with meter.measure(), ThreadPoolExecutor(max_workers=2) as pool:
        future = pool.submit(fails)
        with pytest.raises(OSError):
            future.result()
    assert meter.modelled_seconds == 2.0 and meter.total_requests == 2


def test_a_hundred_thousand_tasks_schedule_exactly():
    """A quadratic scheduler takes minutes here (4,000 tasks took 120 s)."""
    meter = Meter(CostModel(request_latency=0.03))
    with meter.measure():
        run_all(lambda _item: meter.charge("CompleteMultipartUpload"), range(100_000), 64)
    assert meter.total_requests == 100_000
    assert meter.modelled_seconds == pytest.approx(math.ceil(100_000 / 64) * 0.03)


def test_connection_bound():
    model = CostModel(request_latency=0.03, connections=64)
    assert model.connection_bound(1000, serial=1) == pytest.approx(1000 * 0.03 / 64 + 0.03)
    assert CostModel(client_cpu_per_request=0.001, client_cores=2).cpu_bound(1000) == 0.5


def test_rate_limit_bounds_a_phase():
    meter = Meter(CostModel(request_latency=0.0, write_requests_per_prefix=100))
    with meter.measure():
        for _ in range(50):
            meter.charge("PutObject", prefix="bucket/table")
    assert meter.modelled_seconds == pytest.approx(0.5)


def metered_job(url: str, config: dict[str, str], committer_name: str = "magic",
                       files: tuple[str, ...] = ("0/a", "0/b", "1/a", "1/b", "2/a", "2/b"),
                       existing: tuple[str, ...] = ()) -> Meter:
    """A job of one task per directory of ``files`` (1000 bytes each), committed with every
    request metered; ``existing``: files the destination holds before the job commits."""
    committer = outcommit.create_committer(url, config, committer_name)
    for name in existing:
        committer.store.write_bytes(committer.store.join(committer.dest, name), b"old")
    job = JobContext(url, config=committer.config)
    committer.setup_job(job)
    messages = []
    for index, directory in enumerate(sorted({f.rpartition("/")[0] for f in files})):
        task = job.task_attempt(index)
        committer.setup_task(task)
        for name in files:
            if name.rpartition("/")[0] == directory:
                with committer.filesystem(task).open(f"{committer.work_path(task)}/{name}", "wb") as f:
                    f.write(b"x" * 1000)
        messages.append(committer.commit_task(task))
    return metered_job_commit(committer, job, messages, MODEL)


@pytest.mark.s3
def test_botocore_counts_are_exact_for_a_magic_job_commit(s3_config, s3_root):
    meter = metered_job(f"{s3_root}/metered", s3_config)
    assert meter.bytes_copied == 0 and meter.requests["CopyObject"] == 0
    assert meter.requests == {"HeadObject": 1, "PutObject": 2, "CompleteMultipartUpload": 6,
                              "DeleteObject": 1, "ListMultipartUploads": 1, "ListObjectsV2": 2,
                              "DeleteObjects": 1}
    # In series: the job check (HEAD) beside the commit record (PUT); then 6 completions on
    # 4 threads = 2 rounds, beside which the job ends (DELETE of its marker) and is swept
    # (ListMultipartUploads) and its directory is listed; then _SUCCESS (PUT), and one
    # DeleteObjects of the listed state beside the second listing. 5 x 0.1 s, + _SUCCESS bytes.
    assert meter.modelled_seconds == pytest.approx(0.5, abs=1e-3)


@pytest.mark.s3
def test_replace_lists_its_scope_beside_the_commit_record(s3_config, s3_root):
    """'replace' looks at the destination (ListObjectsV2) beside the job check and the
    record: same 5 round trips as 'append' into an empty destination. With old files, the
    pending uploads are listed right after the destination (the check before deleting
    must be fresh), then the old files are deleted: two round trips more."""
    config = {**s3_config, "outcommit.committer.conflict-mode": "replace"}
    empty = metered_job(f"{s3_root}/empty", config)
    assert empty.requests == {"HeadObject": 1, "PutObject": 2, "CompleteMultipartUpload": 6,
                              "DeleteObject": 1, "ListMultipartUploads": 1, "ListObjectsV2": 3,
                              "DeleteObjects": 1}
    assert empty.modelled_seconds == pytest.approx(0.5, abs=1e-3)  # was 0.6: the listing in series

    full = metered_job(f"{s3_root}/full", config, existing=("old-1", "old-2"))
    assert full.requests["DeleteObjects"] == 2  # the old files, then the job's state
    assert full.requests["ListMultipartUploads"] == 2  # the check before deleting; the sweep
    # check || record || (destination, then pending uploads); DeleteObjects of the old files;
    # 2 rounds of completions; _SUCCESS; the state: was 0.8 s (all of it in series).
    assert full.modelled_seconds == pytest.approx(0.7, abs=1e-3)


@pytest.mark.s3
def test_partitioned_replace_lists_its_partitions_threads_at_once(s3_config, s3_root):
    """Dynamic partition overwrite lists each partition the job writes: 8 partitions on 4
    threads are 2 rounds beside the record, where they were 8 listings in series."""
    config = {**s3_config, "outcommit.committer.conflict-mode": "replace"}
    files = tuple(f"date={day}/part" for day in range(8))
    meter = metered_job(f"{s3_root}/table", config, "partitioned", files=files)
    assert meter.requests["ListObjectsV2"] == 8 + 2  # the partitions; the job's state twice
    assert meter.requests["CompleteMultipartUpload"] == 8
    # 2 rounds of listings (beside check and record); 2 rounds of completions; _SUCCESS;
    # the state's deletion: 6 x 0.1 s, where the listings in series made it 1.2 s.
    assert meter.modelled_seconds == pytest.approx(0.6, abs=1e-3)


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


@pytest.mark.s3
def test_botocore_charges_every_attempt_and_every_error_answer(s3_server, s3_root):
    """A 503 answered once: botocore retries, and both attempts are charged; a 404 is a request."""
    import boto3
    from botocore.config import Config

    from outcommit_devtools.faultproxy import FaultProxy, Rule, respond, s3_error
    from outcommit_s3.embedded import DUMMY_KEY, DUMMY_SECRET, REGION

    bucket, _, prefix = s3_root.removeprefix("s3://").partition("/")
    with FaultProxy(s3_server.endpoint_url) as proxy:
        proxy.add(Rule("slow", respond(503, s3_error("SlowDown")), method="PUT", times=1))
        client = boto3.client("s3", endpoint_url=proxy.url, region_name=REGION,
                              aws_access_key_id=DUMMY_KEY, aws_secret_access_key=DUMMY_SECRET,
                              config=Config(retries={"max_attempts": 3, "mode": "standard"},
                                            s3={"addressing_style": "path"}))
        meter = Meter(MODEL)
        detach = attach_botocore(client, meter)
        try:
            with meter.measure():
                client.put_object(Bucket=bucket, Key=f"{prefix}/a", Body=b"12345")
                with pytest.raises(client.exceptions.ClientError):
                    client.head_object(Bucket=bucket, Key=f"{prefix}/missing")
        finally:
            detach()
        assert proxy.requests == 3
    assert meter.requests == {"PutObject": 2, "HeadObject": 1}
    assert meter.bytes_uploaded == 10  # the body went twice
    assert meter.modelled_seconds == pytest.approx(0.3, abs=1e-3)


@pytest.mark.s3
def test_each_key_of_a_batch_delete_is_a_write_against_the_prefix_rate(s3_config, s3_root):
    """S3 counts every key of a DeleteObjects against the prefix's writes per second: 2,500
    keys at 1,000 writes/s take 2.5 s, however few requests carry them."""
    model = CostModel(request_latency=0.01, write_requests_per_prefix=1000)
    store = outcommit.open_store(s3_root, s3_config)
    root = store.strip(s3_root)
    paths = [f"{root}/t/part-{index:05d}" for index in range(2500)]  # missing keys delete fine
    meter = Meter(model)
    detach = attach_botocore(store.client, meter)
    try:
        with meter.measure():
            store.delete_files(paths)
    finally:
        detach()
    assert meter.requests == {"DeleteObjects": 3}
    assert meter.prefix_writes == {f"{root.split('/')[0]}/{root.split('/')[1]}": 2500}
    assert meter.modelled_seconds == pytest.approx(2.5)
    metered = Meter(model)
    with metered.measure():
        MeteredStore(store, metered).delete_files(paths)
    assert metered.requests == {"delete_many": 3} and sum(metered.prefix_writes.values()) == 2500
    assert metered.modelled_seconds == pytest.approx(2.5)


@pytest.mark.s3
def test_metered_store_charges_a_recursive_delete_as_its_listing_and_batches(s3_config, s3_root):
    meter = Meter(MODEL)
    store = MeteredStore(outcommit.open_store(s3_root, s3_config), meter)
    root = store.strip(s3_root)
    for index in range(3):
        store.inner.write_bytes(f"{root}/d/{index}", b"x")
    with meter.measure():
        store.delete(f"{root}/d", recursive=True)
        store.delete(f"{root}/gone")
    assert meter.requests == {"list_files": 1, "delete_many": 1, "delete": 1}
    assert store.inner.list_files(f"{root}/d") == []


@pytest.mark.s3
def test_metered_multipart_keeps_the_stores_part_size(s3_config, s3_root):
    config = {**s3_config, "outcommit.s3.multipart.part-size": str(8 * 1024 * 1024)}
    store = MeteredStore(outcommit.open_store(s3_root, config), Meter(MODEL))
    assert store.multipart().part_size == 8 * 1024 * 1024


@pytest.mark.s3
def test_measure_client_cpu_reports_cpu_and_leaves_nothing(s3_server, s3_root):
    bucket = s3_root.removeprefix("s3://").partition("/")[0]
    client = s3_server.client()
    cpu = measure_client_cpu(client, bucket, requests=5)
    assert 0 < cpu < 1
    listed = client.list_objects_v2(Bucket=bucket, Prefix="__outcommit-cpu-probe/")
    assert listed.get("KeyCount", 0) == 0
