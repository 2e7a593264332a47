"""A losing attempt that outlives its job and is killed as Spark kills it leaves nothing.

CI once found temporary state under an azure-manifest destination after a speculative
run (tests/core/spark/test_cluster_speculation.py): Spark killed the losing attempt, the
driver committed the job and deleted ``_temporary/<jobId>``, the attempt's Python worker
went on writing, and was destroyed before its task commit (which would have found the job
ended) or its abort could run. The rename committers checked the job only at task commit;
each file an attempt writes now checks it after its write (``outcommit.livewrites``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from zombies import zombie_outlives_its_job

RENAME_COMMITTERS = ["v1", "v2", "manifest"]


@pytest.fixture
def memory_root() -> Iterator[str]:
    from fsspec.implementations.memory import MemoryFileSystem

    root = f"/zombie-{uuid.uuid4().hex}"
    yield f"memory://{root}"
    if MemoryFileSystem().exists(root):
        MemoryFileSystem().rm(root, recursive=True)


def won_only(visible: dict[str, bytes]) -> None:
    assert visible == {"date=1/part-00000-000-won-a1.txt": b"written by the winning attempt\n"}, visible


@pytest.fixture(params=["file", "memory"])
def root(request, tmp_path) -> str:
    return f"file://{tmp_path}/out" if request.param == "file" else request.getfixturevalue("memory_root")


@pytest.mark.parametrize("committer", RENAME_COMMITTERS)
def test_zombie_killed_mid_write_of_a_file_opened_after_job_cleanup_leaves_nothing(
        root: str, committer: str) -> None:
    """On a local filesystem and in memory a file (and the directories it needs) exist from
    its open: a zombie killed while writing one it opened after the job's cleanup left
    both behind (the CI failure's window on these stores). The open now checks: refused."""
    outcome = zombie_outlives_its_job(committer, root, {}, "open")
    assert outcome.left == [], f"the killed zombie left temporary state: {outcome.left}"
    assert outcome.zombie.startswith("refused: TaskCommitError"), outcome.zombie
    won_only(outcome.visible)


@pytest.mark.parametrize("committer", RENAME_COMMITTERS)
def test_zombie_closing_its_file_after_job_cleanup_is_refused(root: str, committer: str) -> None:
    """A file opened before the job's cleanup went with the job's directory here (it existed
    from its open); its close after the cleanup is refused all the same, and recreates
    nothing. (On stores where a file appears at its close, Azure's and GCS's, this is the
    window that leaked: tests/plugins/azure/test_azure_zombie.py.)"""
    outcome = zombie_outlives_its_job(committer, root, {}, "close")
    assert outcome.left == [], f"the killed zombie left temporary state: {outcome.left}"
    assert outcome.zombie.startswith("refused: TaskCommitError"), outcome.zombie
    won_only(outcome.visible)
