"""The conformance suites' shared ground: the fixtures a binding provides and the
suites use, the helpers that write and commit tasks, and the oracles (what readers see,
what a job must not leave)."""

from __future__ import annotations

import posixpath
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from ..committer import Committer
from ..context import JobContext, TaskAttemptContext
from ..factory import create_committer, open_store
from ..paths import hidden_from_readers
from ..store import Store
from .faults import Fault
from .roots import own_directory

Files = Mapping[str, bytes]
#: Directories of a job's state in its destination: magic's, and staging's (``directory``,
#: ``partitioned``) where no shared staging directory is configured.
JOB_STATE_PREFIXES = ("__magic", "__staging")


def visible_files(store: Store, dest: str) -> dict[str, bytes]:
    """Data files under ``dest``, with content: what readers see (Spark's rule,
    :func:`outcommit.paths.hidden_from_readers`: ``_src=a/`` is a partition)."""
    found: dict[str, bytes] = {}
    for info in store.list_files(dest):
        rel = info.path[len(dest.rstrip("/")) + 1:]
        if hidden_from_readers(rel):
            continue
        found[rel] = store.read_bytes(info.path)
    return found


def leftovers(store: Store, dest: str) -> list[str]:
    """Temporary state a finished job must not leave: temp dirs and pending uploads.

    Uncommitted blocks of a block-list store (Azure) are not counted: nothing can remove
    one writer's blocks alone, and the service discards them (docs/azure.md); they are
    invisible to readers, which ``visible_files`` checks.
    """
    left = [info.path for info in store.list_files(dest)
            if any(part == "_temporary" or part.startswith(JOB_STATE_PREFIXES)
                   for part in info.path[len(dest.rstrip("/")) + 1:].split("/"))]
    left += [c.path for c in store.list_dir(dest)
             if c.name == "_temporary" or c.name.startswith(JOB_STATE_PREFIXES)]
    multipart = store.multipart()
    if multipart is not None:
        left += [f"pending upload {u.path} {u.upload_id}"
                 for u in multipart.list_pending(dest.rstrip("/") + "/")]
    return sorted(set(left))


def run_tasks(committer: Committer, job: JobContext, tasks: int = 2,
              n: int = 2) -> tuple[list[dict[str, Any]], dict[str, bytes]]:
    """Set up, write (``n`` files in a ``p=<index>`` partition each) and commit ``tasks`` tasks.

    Returns the task messages and the files the job should publish.
    """
    messages, expected = [], {}
    for index in range(tasks):
        task = job.task_attempt(index)
        committer.setup_task(task)
        files = {f"p={index}/part-{index}-{i}.bin": f"task {index} file {i}".encode() for i in range(n)}
        ConformanceBase.write(committer, task, files)
        expected.update(files)
        messages.append(committer.commit_task(task))
    return messages, expected


class ConformanceBase:
    """Fixtures and helpers of the committer conformance suites (no scenarios)."""
    """Abstract suite: not collected itself (no ``Test`` prefix), run by subclasses."""

    job_commit_fault: Fault = Fault("rename_file")
    task_publish_operation: str | None = None

    # -- fixtures a binding provides ------------------------------------------------
    @pytest.fixture
    def committer_name(self) -> str:
        raise NotImplementedError("the binding must provide the committer_name fixture")

    @pytest.fixture
    def destination_root(self) -> str:
        raise NotImplementedError("the binding must provide the destination_root fixture")

    @pytest.fixture
    def config(self) -> dict[str, Any]:
        return {}

    # -- helpers ------------------------------------------------------------------------
    @pytest.fixture
    def test_root(self, destination_root: str, config: dict[str, Any],
                  request: pytest.FixtureRequest) -> Iterator[str]:
        """This test's own directory below ``destination_root``, made for it and removed
        after, pending uploads and all (``outcommit.testing.roots``): a binding may give a
        fixed root, such as a real bucket's."""
        yield from own_directory(destination_root, request.node.name, config)

    @pytest.fixture
    def dest(self, test_root: str) -> str:
        return test_root + "/dataset1"

    @pytest.fixture
    def store(self, dest: str, config: dict[str, Any]) -> Store:
        return open_store(dest, config)

    @pytest.fixture
    def make(self, committer_name: str, config: dict[str, Any]):  # type: ignore[no-untyped-def]
        def make(url: str, store: Store | None = None, **extra: Any) -> Committer:
            return create_committer(url, {**config, **extra}, committer_name, store=store)
        return make

    @staticmethod
    def write(committer: Committer, task: TaskAttemptContext, files: Files) -> None:
        fs, base = committer.filesystem(task), committer.work_path(task)
        for rel, data in files.items():
            with fs.open(posixpath.join(base, rel), "wb") as f:
                f.write(data)

    def run_task(self, committer: Committer, job: JobContext, index: int, files: Files,
                 attempt: int = 0) -> dict[str, Any]:
        task = job.task_attempt(index, attempt)
        committer.setup_task(task)
        self.write(committer, task, files)
        return committer.commit_task(task)

    @staticmethod
    def files_of(index: int, tag: str = "", n: int = 2) -> dict[str, bytes]:
        return {f"part-{index:05d}-{i}.txt": f"task {index} file {i} {tag}".encode() for i in range(n)}

    def assert_no_leaks(self, store: Store, dest_url: str) -> None:
        assert leftovers(store, store.strip(dest_url)) == []
