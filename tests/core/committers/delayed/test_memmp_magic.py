"""The delayed-completion family's job commit on ``memmp://``: multipart files, idempotent
completion, and what a completion that goes wrong leaves."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from outcommit.committers.delayed.memmp import MemoryMagicCommitter
from outcommit.context import JobContext
from outcommit.errors import CommitError
from outcommit.factory import create_committer, open_store
from outcommit.testing.conformance import CommitterConformance

# 3 parts of 16 bytes and a short last one: completion checks order, etags and sizes.
BIG = bytes(range(52))


def _run_tasks(committer, job: JobContext, files: dict[str, bytes]) -> list[Any]:  # type: ignore[no-untyped-def]
    task = job.task_attempt(0)
    committer.setup_task(task)
    CommitterConformance.write(committer, task, files)
    return [committer.commit_task(task)]


@pytest.fixture
def dest(memmp_root: str) -> str:
    return memmp_root + "/table"


def test_memmp_selects_the_core_binding_of_the_family(dest: str, small_parts: dict[str, Any]) -> None:
    committer = create_committer(dest, small_parts)
    assert isinstance(committer, MemoryMagicCommitter)
    assert committer.expectations(JobContext(dest)).uri_schemes == ("memmp",)


def test_multipart_files_appear_only_at_job_commit(dest: str, small_parts: dict[str, Any]) -> None:
    committer = create_committer(dest, small_parts)
    store = open_store(dest, small_parts)
    job = JobContext(dest, config=committer.config)
    committer.setup_job(job)
    messages = _run_tasks(committer, job, {"part-0.bin": BIG, "p=1/small.txt": b"small"})
    assert not store.exists(store.strip(dest) + "/part-0.bin")
    pending = store.multipart().list_pending(store.strip(dest) + "/")  # type: ignore[union-attr]
    assert len(pending) == 2
    committer.commit_job(job, messages)
    assert store.read_bytes(store.strip(dest) + "/part-0.bin") == BIG
    assert store.read_bytes(store.strip(dest) + "/p=1/small.txt") == b"small"
    assert store.multipart().list_pending(store.strip(dest) + "/") == []  # type: ignore[union-attr]


def test_an_upload_completed_before_job_commit_is_success(dest: str,
                                                          small_parts: dict[str, Any]) -> None:
    """A completion whose answer was lost (an earlier job commit's) is done again by the
    next job commit: the store answers an upload already completed with these parts as
    success (``CommitOperations.complete_one``), and the file is the job's."""
    committer = create_committer(dest, small_parts)
    store = open_store(dest, small_parts)
    job = JobContext(dest, config=committer.config)
    committer.setup_job(job)
    messages = _run_tasks(committer, job, {"part-0.bin": BIG})
    mp = store.multipart()
    assert mp is not None
    (upload,) = mp.list_pending(store.strip(dest) + "/")
    # The parts the writer uploaded: 16 bytes each (md5 etags, as S3's).
    etags = [hashlib.md5(BIG[i:i + 16]).hexdigest() for i in range(0, len(BIG), 16)]
    mp.complete(upload.path, upload.upload_id, etags)  # the earlier attempt's
    committer.commit_job(job, messages)
    assert store.read_bytes(store.strip(dest) + "/part-0.bin") == BIG


def test_an_aborted_upload_fails_job_commit_and_shows_nothing(dest: str,
                                                              small_parts: dict[str, Any]) -> None:
    committer = create_committer(dest, small_parts)
    store = open_store(dest, small_parts)
    job = JobContext(dest, config=committer.config)
    committer.setup_job(job)
    messages = _run_tasks(committer, job, {"part-0.bin": BIG})
    mp = store.multipart()
    assert mp is not None
    (upload,) = mp.list_pending(store.strip(dest) + "/")
    assert mp.abort(upload.path, upload.upload_id)  # a sweep, a lifecycle rule
    with pytest.raises(CommitError):
        committer.commit_job(job, messages)
    assert not store.exists(store.strip(dest) + "/part-0.bin")


def test_the_task_filesystem_names_the_bindings_scheme(dest: str, small_parts: dict[str, Any]) -> None:
    """fsspec's URLs of a task's files name the store it writes to, not S3's schemes."""
    committer = create_committer(dest, small_parts)
    job = JobContext(dest, config=committer.config)
    committer.setup_job(job)
    task = job.task_attempt(0)
    committer.setup_task(task)
    fs = committer.filesystem(task)
    assert fs.unstrip_protocol(committer.work_path(task)).startswith("memmp:///")
    committer.abort_task(task)
    committer.abort_job(job)


def test_memmp_magic_is_made_for_memmp_only(tmp_path: Any) -> None:
    """Its uploads live in this process: on another store (which may well have multipart
    uploads and exclusive create) it is refused, and never offered as a safe choice there."""
    from outcommit.errors import UnsafeCommitterError
    from outcommit.factory import describe_capabilities

    with pytest.raises(UnsafeCommitterError, match=r"made for memmp:// only, not file://") as caught:
        create_committer(f"file://{tmp_path}/out", committer="memmp-magic")
    assert "memmp-magic" not in caught.value.safe and "v1" in caught.value.safe
    assert "memmp-magic" not in describe_capabilities(f"file://{tmp_path}/out")["safe_committers"]
    assert "memmp-magic" in describe_capabilities("memmp:///bucket/out")["safe_committers"]
