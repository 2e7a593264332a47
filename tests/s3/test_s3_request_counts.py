"""Exact S3 requests of the magic write and task-commit path (a regression here is a cost).

Counted on the committer's own botocore client (every request it sends, by operation).
Per file: CreateMultipartUpload, UploadPart, PUT ``.pending``, PUT marker, and one HEAD of
the job marker *after* those writes (a straggler's late file is undone, never left behind).
Per task attempt: the HEAD of setup_task; at commit one listing, publish (HEAD, exclusive
PUT of the pendingset, exclusive PUT of the claim, HEAD) and one DeleteObjects. No GET of a
``.pending`` this process saved: the listing's etag proves the stored copy is the one held.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from s3_helpers import outcome, start

import outcommit

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


def test_one_file_is_five_requests_and_the_liveness_check_comes_last(s3_config, s3_root):
    committer, job = start(f"{s3_root}/order", s3_config)
    task = job.task_attempt(0)
    committer.setup_task(task)
    with recorded(committer.store.client) as calls:
        write(committer, task, {"d=1/a.parquet": b"a" * 1000})
    assert calls == ["CreateMultipartUpload", "UploadPart", "PutObject", "PutObject", "HeadObject"]
    committer.abort_job(job)


@pytest.mark.parametrize("files", [1, 4])
def test_write_and_task_commit_requests(files, s3_config, s3_root):
    url = f"{s3_root}/count{files}"
    committer, job = start(url, s3_config)
    task = job.task_attempt(0)
    data = {f"d={i}/part-{i}.parquet": bytes([65 + i]) * 1000 for i in range(files)}
    with recorded(committer.store.client) as calls:
        committer.setup_task(task)
        write(committer, task, data)
        written = len(calls)
        message = committer.commit_task(task)
    assert Counter(calls[:written]) == {"HeadObject": 1 + files, "CreateMultipartUpload": files,
                                        "UploadPart": files, "PutObject": 2 * files}
    assert Counter(calls[written:]) == {"ListObjectsV2": 1, "HeadObject": 2, "PutObject": 2,
                                        "DeleteObjects": 1}
    assert len(calls) == 5 * files + 7
    committer.commit_job(job, [message])
    assert outcome(url, s3_config) == (data, [])


def test_pending_files_of_another_process_are_read(s3_config, s3_root):
    """Another committer instance (another process) wrote into the same attempt: its
    ``.pending`` is not in our memory, so it is read (one GET) and committed too."""
    url = f"{s3_root}/other"
    committer, job = start(url, s3_config)
    other = outcommit.create_committer(url, s3_config, "magic")
    task = job.task_attempt(0)
    committer.setup_task(task)
    write(committer, task, {"ours.txt": b"ours"})
    write(other, task, {"theirs.txt": b"theirs"})
    with recorded(committer.store.client) as calls:
        message = committer.commit_task(task)
    assert Counter(calls)["GetObject"] == 1
    committer.commit_job(job, [message])
    assert outcome(url, s3_config) == ({"ours.txt": b"ours", "theirs.txt": b"theirs"}, [])


def test_a_pending_file_replaced_after_we_saved_it_is_read_not_trusted(s3_config, s3_root):
    """Same path rewritten by another writer: the listed etag no longer matches what this
    process saved, so the stored file (the other writer's upload) is what gets committed."""
    url = f"{s3_root}/replaced"
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


def test_a_tampered_pending_file_is_refused_even_though_we_hold_a_copy(s3_config, s3_root):
    url = f"{s3_root}/tampered"
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
