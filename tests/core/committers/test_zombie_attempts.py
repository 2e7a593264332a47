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

from outcommit import JobContext, create_committer, open_store
from outcommit.testing.suite import leftovers
from zombies import FILE, zombie_outlives_its_job

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


@pytest.mark.parametrize("beside", RENAME_COMMITTERS)
@pytest.mark.parametrize("committer", RENAME_COMMITTERS)
def test_what_a_zombie_killed_in_its_check_left_goes_at_the_next_jobs_setup(
        tmp_path, committer: str, beside: str) -> None:
    """The window the check leaves: killed between the write that created its file and
    the check, the zombie leaves that file. The next job on the destination removes it at
    its setup (``sweep_ended_jobs``), and keeps what is not an ended job of ours: a live
    job's state (``beside``, of any committer sharing ``_temporary``: v1 names its attempt
    directories ``0``, the manifest committer ``00``), and another tool's (Hadoop's
    ``_temporary/0``)."""
    url = f"file://{tmp_path}/out"
    outcome = zombie_outlives_its_job(committer, url, {}, "check")
    assert outcome.zombie == "killed"
    assert [p.rsplit("/", 1)[1] for p in outcome.left if p.endswith(".txt")] == [FILE.rsplit("/", 1)[1]]
    store = open_store(url)
    dest = store.strip(url)
    hadoop = store.join(dest, "_temporary/0/_temporary/attempt_202611281136_0001_m_000000_0/part-0")
    store.write_bytes(hadoop, b"Hadoop's")
    live, live_committer = JobContext(url), create_committer(url, committer=beside)
    live_committer.setup_job(live)
    live_task = live.task_attempt(0, 0)
    live_committer.setup_task(live_task)
    with live_committer.filesystem(live_task).open(
            store.join(live_committer.work_path(live_task), "live.txt"), "wb") as f:
        f.write(b"live")
    following = JobContext(url)
    create_committer(url, committer=committer).setup_job(following)
    left = leftovers(store, dest)
    assert not [p for p in left if outcome.job_id in p], f"the ended job's state stayed: {left}"
    assert [p for p in left if p.endswith("live.txt")], f"a live job's output went: {left}"
    assert hadoop in left, f"another tool's state went: {left}"
    for job, name in ((live, beside), (following, committer)):
        create_committer(url, committer=name).abort_job(job)
        create_committer(url, committer=name).cleanup_job(job)
    assert leftovers(store, dest) == [store.join(dest, "_temporary"), hadoop]


@pytest.mark.parametrize("committer", RENAME_COMMITTERS)
def test_outcommit_jobs_tells_and_removes_what_a_zombie_of_an_aborted_job_left(
        tmp_path, committer: str, capsys) -> None:
    """Left by a zombie of a job that was aborted, and found before any next job: the
    state holds no marker, journal or abort note, but its names are the job's own, so
    ``outcommit jobs`` lists it as outcommit's (not as another tool's) and aborts it."""
    import json

    from outcommit.cli import main

    url = f"file://{tmp_path}/out"
    outcome = zombie_outlives_its_job(committer, url, {}, "check", then="abort")
    assert outcome.zombie == "killed" and outcome.visible == {}
    assert main(["jobs", "list", url, "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(row["jobId"], row["status"]) for row in listed] == [(outcome.job_id, "not-committed")]
    assert main(["jobs", "abort", url, outcome.job_id, "--force"]) == 0
    store = open_store(url)
    assert leftovers(store, store.strip(url)) == []


def test_what_a_manifest_task_commit_killed_after_saving_its_manifest_left_goes_at_the_next_setup(
        tmp_path) -> None:
    """The manifest committer's task commit checks the job, saves the manifest, checks
    again: no order of a write and a check leaves nothing if the process dies between them.
    Held at the save until the job committed and cleaned up, then killed in the check
    after it, the zombie leaves its manifest (and the directories the save recreated); the
    next job's setup removes them."""
    url = f"file://{tmp_path}/out"
    outcome = zombie_outlives_its_job("manifest", url, {}, "commit")
    assert outcome.zombie == "killed"
    assert [p for p in outcome.left if p.endswith("-manifest.json")], outcome.left
    following = JobContext(url)
    committer = create_committer(url, committer="manifest")
    committer.setup_job(following)
    store = open_store(url)
    left = leftovers(store, store.strip(url))
    assert not [p for p in left if outcome.job_id in p], f"the ended job's state stayed: {left}"
    committer.abort_job(following)
    committer.cleanup_job(following)
    assert leftovers(store, store.strip(url)) == []


def test_a_sweep_whose_ended_job_is_swept_meanwhile_warns_of_nothing(tmp_path, caplog) -> None:
    """Tasks of a streaming batch each set the job up, so two sweeps can race for one dead
    directory: the one that finds it gone has nothing to report."""
    import logging

    from outcommit.testing.faults import Fault, FaultInjectingStore

    url = f"file://{tmp_path}/out"
    outcome = zombie_outlives_its_job("manifest", url, {}, "check")
    plain = open_store(url)
    store = FaultInjectingStore(open_store(url))

    def swept_by_another(_operation: str, args: tuple) -> bool:
        plain.delete(args[0], recursive=True)  # the other sweeper wins the race
        return True

    raced = Fault("delete", path_contains=outcome.job_id, predicate=swept_by_another,
                  error=lambda path: FileNotFoundError(path))
    store.add(raced)
    following = JobContext(url)
    committer = create_committer(url, committer="manifest", store=store)
    with caplog.at_level(logging.WARNING):
        committer.setup_job(following)
    assert raced.fired == 1
    assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
    assert not [p for p in leftovers(plain, plain.strip(url)) if outcome.job_id in p]
    committer.abort_job(following)
    committer.cleanup_job(following)
