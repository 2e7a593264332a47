"""Exact S3 requests of the magic write and task-commit path (a regression here is a cost).

Counted on the committer's own botocore client (every request it sends, by operation).

In memory (the default, the attempt set up in the writing process): per file smaller than
a part, CreateMultipartUpload (sent when the file is opened) and UploadPart, and nothing
else; per task attempt, nothing at setup and three at commit: the exclusive PUT of the
pendingset, the exclusive PUT of the claim, and one HEAD of the job marker *after* them
(a straggler's commit is undone, never left behind).

With ``.pending`` files (writers in several processes): per file also the ``.pending``,
the marker and a HEAD after them; per task a HEAD at setup, and at commit one listing, a
GET per ``.pending``, the publish (PUT, PUT, HEAD) and one DeleteObjects.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from s3_helpers import outcome, start

import outcommit
from outcommit import JobContext

pytestmark = pytest.mark.s3


@contextmanager
def recorded(*clients: Any) -> Iterator[list[str]]:
    """S3 operations sent by ``clients``, in order, while the block runs."""
    calls: list[str] = []

    def before(model: Any, **_: Any) -> None:
        calls.append(model.name)

    for client in clients:
        client.meta.events.register("before-call.s3", before)
    try:
        yield calls
    finally:
        for client in clients:
            client.meta.events.unregister("before-call.s3", before)


def write(committer: Any, task: Any, files: dict[str, bytes]) -> None:
    fs, base = committer.filesystem(task), committer.work_path(task)
    for rel, data in files.items():
        with fs.open(f"{base}/{rel}", "wb") as f:
            f.write(data)


PENDING_FILES = {"outcommit.magic.track-commits-in-memory": "false"}


@pytest.mark.parametrize("files", [1, 4])
def test_in_memory_two_requests_per_file_and_three_per_task(files, s3_config, s3_root):
    url = f"{s3_root}/count{files}"
    committer, job = start(url, s3_config)
    task = job.task_attempt(0)
    data = {f"d={i}/part-{i}.parquet": bytes([65 + i]) * 1000 for i in range(files)}
    with recorded(committer.store.client) as calls:
        committer.setup_task(task)
        write(committer, task, data)
        written = len(calls)  # files finish in the background: counted at commit too
        message = committer.commit_task(task)
    assert written <= 2 * files
    assert Counter(calls) == {"CreateMultipartUpload": files, "UploadPart": files, "PutObject": 2,
                              "HeadObject": 1}
    assert calls[-3:] == ["PutObject", "PutObject", "HeadObject"]  # the check comes last
    assert len(calls) == 2 * files + 3
    committer.commit_job(job, [message])
    assert outcome(url, s3_config) == (data, [])


@pytest.mark.parametrize("name", ["magic", "directory"])
def test_a_job_committed_with_task_messages_costs_two_requests_per_task(name, s3_config, s3_root):
    """Engines that commit with the tasks' messages (Spark, the local engine, Ray, Dask,
    streaming) say so: no claim, which only a job commit by discovery reads."""
    url = f"{s3_root}/messages-{name}"
    committer = outcommit.create_committer(url, s3_config, name)
    job = JobContext(url, config=committer.config, task_messages=True)
    committer.setup_job(job)
    task = job.task_attempt(0)
    data = {f"d={i}/part-{i}.parquet": bytes([65 + i]) * 1000 for i in range(2)}
    with recorded(committer.store.client) as calls:
        committer.setup_task(task)
        write(committer, task, data)
        written = len(calls)
        message = committer.commit_task(task)
    assert calls[written:][-2:] == ["PutObject", "HeadObject"]
    assert Counter(calls) == {"CreateMultipartUpload": 2, "UploadPart": 2, "PutObject": 1, "HeadObject": 1}
    assert not committer.meta.exists(committer.layout(job).claim(task))
    committer.commit_job(job, [message])
    files, leftover = outcome(url, s3_config)
    assert len(files) == 2 and leftover == []


def test_discovery_of_a_task_messages_job_with_two_published_attempts_fails_loudly(s3_config, s3_root):
    """Without claims, a job commit by discovery cannot tell which of two published attempts
    committed: it refuses, and commits nothing."""
    url = f"{s3_root}/messages-discovery"
    committer = outcommit.create_committer(url, s3_config, "magic")
    job = JobContext(url, config=committer.config, task_messages=True)
    committer.setup_job(job)
    for attempt in (0, 1):
        task = job.task_attempt(0, attempt)
        committer.setup_task(task)
        write(committer, task, {"a.txt": f"attempt {attempt}".encode()})
        committer.commit_task(task)
    with pytest.raises(outcommit.CommitError, match="no record of which one committed"):
        committer.commit_job(job)
    committer.abort_job(job)
    assert outcome(url, s3_config) == ({}, [])


def test_in_memory_the_upload_starts_when_the_file_is_opened(s3_config, s3_root):
    """The CreateMultipartUpload goes out while the writer still writes: at close a small
    file waits for one round trip (its part), as a plain PUT would."""
    url = f"{s3_root}/early"
    committer, job = start(url, s3_config)
    task = job.task_attempt(0)
    committer.setup_task(task)
    fs, base = committer.filesystem(task), committer.work_path(task)
    with recorded(committer.store.client) as calls:
        with fs.open(f"{base}/a.txt", "wb") as f:
            f.write(b"a")
            f._starting.result()  # the upload exists before the file is closed
            assert calls == ["CreateMultipartUpload"]
        message = committer.commit_task(task)
    assert Counter(calls) == {"CreateMultipartUpload": 1, "UploadPart": 1, "PutObject": 2, "HeadObject": 1}
    committer.commit_job(job, [message])
    assert outcome(url, s3_config) == ({"a.txt": b"a"}, [])


def test_in_memory_a_file_abandoned_after_its_upload_started_leaves_nothing(s3_config, s3_root):
    url = f"{s3_root}/abandoned"
    committer, job = start(url, s3_config)
    task = job.task_attempt(0)
    committer.setup_task(task)
    fs, base = committer.filesystem(task), committer.work_path(task)
    with pytest.raises(RuntimeError), fs.open(f"{base}/broken.txt", "wb") as f:
        f.write(b"half")
        f._starting.result()
        raise RuntimeError("the writer failed")
    assert list(committer.mp.list_pending(committer.dest + "/")) == []  # aborted, not left to a sweep
    with recorded(committer.store.client) as calls:
        message = committer.commit_task(task)
    assert "CreateMultipartUpload" not in calls and message["files"] == 0
    committer.commit_job(job, [message])
    assert outcome(url, s3_config) == ({}, [])


def test_in_memory_a_file_still_open_when_the_attempt_ends_leaves_no_upload(s3_config, s3_root):
    """Its upload started at open: aborted when the attempt is aborted (or committed)
    without it; closing the file afterwards fails instead of uploading into nothing."""
    url = f"{s3_root}/still-open"
    committer, job = start(url, s3_config)
    task = job.task_attempt(0)
    committer.setup_task(task)
    fs, base = committer.filesystem(task), committer.work_path(task)
    f = fs.open(f"{base}/open.txt", "wb")
    f.write(b"never closed in time")
    f._starting.result()
    committer.abort_task(task)
    assert list(committer.mp.list_pending(committer.dest + "/")) == []
    with pytest.raises(RuntimeError):
        f.close()
    assert list(committer.mp.list_pending(committer.dest + "/")) == []
    committer.abort_job(job)
    assert outcome(url, s3_config) == ({}, [])


def test_in_memory_large_files_upload_their_parts_in_parallel(s3_config, s3_root):
    url = f"{s3_root}/large"
    config = {**s3_config, "outcommit.s3.multipart.part-size": str(5 * 1024 * 1024)}
    committer, job = start(url, config)
    task = job.task_attempt(0)
    committer.setup_task(task)
    data = {"big.bin": bytes(range(256)) * (4 * 5 * 1024 * 4 + 7)}  # 4 parts and a bit
    with recorded(committer.store.client) as calls:
        write(committer, task, data)
        message = committer.commit_task(task)
    assert Counter(calls) == {"CreateMultipartUpload": 1, "UploadPart": 5, "PutObject": 2,
                              "HeadObject": 1}
    assert len(message["commits"][0]["etags"]) == 5
    committer.commit_job(job, [message])
    assert outcome(url, config) == (data, [])


def test_with_pending_files_five_requests_per_file_and_the_liveness_check_comes_last(s3_config, s3_root):
    config = {**s3_config, **PENDING_FILES}
    committer, job = start(f"{s3_root}/order", config)
    task = job.task_attempt(0)
    committer.setup_task(task)
    with recorded(committer.store.client) as calls:
        write(committer, task, {"d=1/a.parquet": b"a" * 1000})
    assert calls == ["CreateMultipartUpload", "UploadPart", "PutObject", "PutObject", "HeadObject"]
    committer.abort_job(job)


@pytest.mark.parametrize("files", [1, 4])
def test_with_pending_files_write_and_task_commit_requests(files, s3_config, s3_root):
    url = f"{s3_root}/pcount{files}"
    config = {**s3_config, **PENDING_FILES}
    committer, job = start(url, config)
    task = job.task_attempt(0)
    data = {f"d={i}/part-{i}.parquet": bytes([65 + i]) * 1000 for i in range(files)}
    with recorded(committer.store.client) as calls:
        committer.setup_task(task)
        write(committer, task, data)
        written = len(calls)
        message = committer.commit_task(task)
    assert Counter(calls[:written]) == {"HeadObject": 1 + files, "CreateMultipartUpload": files,
                                        "UploadPart": files, "PutObject": 2 * files}
    assert Counter(calls[written:]) == {"ListObjectsV2": 1, "GetObject": files, "HeadObject": 1,
                                        "PutObject": 2, "DeleteObjects": 1}
    committer.commit_job(job, [message])
    assert outcome(url, config) == (data, [])


def _write_in_another_process(fs: Any, path: str, data: bytes) -> None:
    with fs.open(path, "wb") as f:
        f.write(data)


def test_a_filesystem_sent_to_another_process_saves_pending_files_that_commit_reads(s3_config, s3_root):
    """The task's filesystem pickled to a worker process: writes there cannot reach this
    process's memory, so they save .pending files, and this task commit lists and reads them."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    url = f"{s3_root}/other"
    committer, job = start(url, s3_config)
    task = job.task_attempt(0)
    committer.setup_task(task)
    fs, base = committer.filesystem(task), committer.work_path(task)
    write(committer, task, {"ours.txt": b"ours"})
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        pool.submit(_write_in_another_process, fs, f"{base}/theirs.txt", b"theirs").result()
    with recorded(committer.store.client) as calls:
        message = committer.commit_task(task)
    assert Counter(calls)["GetObject"] == 1 and Counter(calls)["ListObjectsV2"] == 1
    committer.commit_job(job, [message])
    assert outcome(url, s3_config) == ({"ours.txt": b"ours", "theirs.txt": b"theirs"}, [])


def test_a_pending_file_replaced_by_another_writer_is_the_one_committed(s3_config, s3_root):
    """Same path written by two writers: the stored .pending (the later writer's upload) is
    what gets committed, and the earlier upload does not leak."""
    url = f"{s3_root}/replaced"
    s3_config = {**s3_config, **PENDING_FILES}
    committer, job = start(url, s3_config)
    other = outcommit.create_committer(url, s3_config, "magic")
    task = job.task_attempt(0)
    committer.setup_task(task)
    write(committer, task, {"a.txt": b"first"})
    write(other, task, {"a.txt": b"second"})
    with recorded(committer.store.client) as calls:
        message = committer.commit_task(task)
    assert Counter(calls)["GetObject"] == 1
    committer.commit_job(job, [message])  # the sweep aborts the first writer's upload
    assert outcome(url, s3_config) == ({"a.txt": b"second"}, [])


def test_a_tampered_pending_file_is_refused(s3_config, s3_root):
    url = f"{s3_root}/tampered"
    s3_config = {**s3_config, **PENDING_FILES}
    committer, job = start(url, s3_config)
    task = job.task_attempt(0)
    committer.setup_task(task)
    write(committer, task, {"a.txt": b"a"})
    store = committer.store
    [pending] = [f.path for f in store.list_files(committer.task_attempt_dir(task))
                 if f.path.endswith(".pending")]
    body = store.read_bytes(pending).replace(b'"destinationKey": "', b'"destinationKey": "../x/')
    store.write_bytes(pending, body)
    with pytest.raises(outcommit.CorruptFileError):
        committer.commit_task(task)
    committer.abort_job(job)
    assert outcome(url, s3_config) == ({}, [])


@pytest.mark.parametrize("name", ["directory", "partitioned"])
def test_staging_two_requests_per_file_and_three_per_task(name, s3_config, s3_root):
    url = f"{s3_root}/staging-{name}"
    committer, job = start(url, s3_config, name)
    task = job.task_attempt(0)
    data = {f"d={i}/part-{i}.parquet": bytes([65 + i]) * 1000 for i in range(3)}
    with recorded(committer.store.client) as calls:
        committer.setup_task(task)
        write(committer, task, data)
        message = committer.commit_task(task)
    assert Counter(calls) == {"CreateMultipartUpload": 3, "UploadPart": 3, "PutObject": 2,
                              "HeadObject": 1}
    committer.commit_job(job, [message])
    assert set(outcome(url, s3_config)[0]) == {
        f"d={i}/part-{i}-{job.job_id}.parquet" for i in range(3)}
