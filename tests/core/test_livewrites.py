"""The rename committers' task filesystem (``outcommit.livewrites``) through fsspec's own
ways of making a file: each works as on the store's filesystem while the job is live, and
after the job ended is refused and leaves nothing (the per-file check of
tests/core/committers/test_zombie_attempts.py, for the calls that do not go through
``open``'s own write path)."""

from __future__ import annotations

import os
import posixpath
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from outcommit import JobContext, create_committer, open_store
from outcommit.errors import TaskCommitError
from outcommit.testing.suite import leftovers


@pytest.fixture(params=["file", "memory"])
def dest(request: Any, tmp_path: Any) -> Iterator[str]:
    (tmp_path / "local.bin").write_bytes(b"made outside the job\n")  # what put/put_file send
    if request.param == "file":
        yield f"file://{tmp_path}/out"
        return
    from fsspec.implementations.memory import MemoryFileSystem

    root = f"/livewrites-{uuid.uuid4().hex}"
    yield f"memory://{root}"
    MemoryFileSystem().rm(root, recursive=True) if MemoryFileSystem().exists(root) else None


class Task:
    """One task attempt of a set-up job, its filesystem, and a file made outside the job."""

    def __init__(self, dest: str, name: str, local: Any) -> None:
        self.committer = create_committer(dest, {}, name)
        self.job = JobContext(dest)
        self.committer.setup_job(self.job)
        self.attempt = self.job.task_attempt(0)
        self.committer.setup_task(self.attempt)
        self.fs = self.committer.filesystem(self.attempt)
        self.work = self.committer.work_path(self.attempt)
        self.outside = posixpath.join(posixpath.dirname(self.committer.store.strip(dest)),
                                      f"outside-{uuid.uuid4().hex}.bin")
        self.committer.store.fs.pipe_file(self.outside, b"made outside the job\n")
        self.local = str(local)

    def path(self, name: str) -> str:
        return posixpath.join(self.work, name)

    def end(self) -> None:
        self.committer.abort_job(self.job)
        self.committer.cleanup_job(self.job)

    def left(self) -> list[str]:
        store = open_store(self.job.destination, {})
        return leftovers(store, store.strip(self.job.destination))


def transaction_write(fs: Any, path: str) -> None:
    with fs.transaction, fs.open(path, "wb") as stream:
        stream.write(b"in a transaction\n")


MAKERS: dict[str, Callable[[Task, str], None]] = {
    "put_file": lambda task, path: task.fs.put_file(task.local, path),
    "put": lambda task, path: task.fs.put(task.local, path),
    "cp_file": lambda task, path: task.fs.cp_file(task.outside, path),
    "copy": lambda task, path: task.fs.copy(task.outside, path),
    "mv": lambda task, path: task.fs.mv(task.outside, path),
    "transaction": lambda task, path: transaction_write(task.fs, path),
}


@pytest.mark.parametrize("maker", sorted(MAKERS))
@pytest.mark.parametrize("committer", ["v1", "manifest"])
def test_a_file_made_while_the_job_is_live_is_there(dest: str, tmp_path: Any, committer: str,
                                                    maker: str) -> None:
    """put_file/put failed (fsspec's classmethod ``_parent`` called the wrapper's
    ``_strip_protocol`` unbound) and a local transaction failed at its end (the wrapper
    opened its files with autocommit, then the transaction committed them again)."""
    task = Task(dest, committer, tmp_path / "local.bin")
    path = task.path("sub/made.bin")
    MAKERS[maker](task, path)
    assert task.fs.cat_file(path) in (b"made outside the job\n", b"in a transaction\n")


@pytest.mark.parametrize("maker", sorted(MAKERS))
def test_a_file_made_after_the_job_ended_is_refused_and_gone(dest: str, tmp_path: Any, maker: str) -> None:
    """A copy, a move or a transaction's file made under the job's directory after the
    job's cleanup stayed there for good (a copy and a move never went through the check)."""
    task = Task(dest, "v1", tmp_path / "local.bin")
    task.end()
    with pytest.raises(TaskCommitError, match="ended while task attempt"):
        MAKERS[maker](task, task.path("sub/late.bin"))
    assert task.left() == [], f"a file made after the job ended stayed: {task.left()}"


def test_a_move_is_the_stores_own(tmp_path: Any) -> None:
    """The wrapper's move was fsspec's generic copy and delete: on a local disk a rename
    became a copy of the bytes (and not atomic any more)."""
    task = Task(f"file://{tmp_path}/out", "v1", tmp_path / "local.bin")

    before = os.stat(task.outside).st_ino
    task.fs.mv(task.outside, task.path("moved.bin"))
    assert os.stat(task.path("moved.bin")).st_ino == before
