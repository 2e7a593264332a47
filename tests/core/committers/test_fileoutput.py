"""v1 and v2 beyond the shared suite: interrupted job commits, repeated calls."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

import outcommit
from outcommit import JobContext
from outcommit.testing.conformance import leftovers, visible_files

# A driver in its own process: job commit of the job given on stdin, killed (SIGKILL)
# right after its first directory merge took effect.
KILLED_DRIVER = """
import json, sys
import outcommit
from outcommit.testing.faults import Fault, FaultInjectingStore, kill_process
args = json.load(sys.stdin)
store = FaultInjectingStore(outcommit.open_store(args["dest"], args["config"]),
                            [Fault("rename_dir", when="after", error=kill_process)])
committer = outcommit.create_committer(args["dest"], args["config"], "v1", store=store)
committer.commit_job(outcommit.JobContext.from_dict(args["job"]), args["messages"])
"""


def files_of(task: int) -> dict[str, bytes]:
    return {f"p={task}/part-{task}-{i}.txt": f"task {task} file {i}".encode() for i in range(2)}


def run_task(committer: Any, job: JobContext, index: int, files: dict[str, bytes],
             attempt: int = 0) -> dict[str, Any]:
    task = job.task_attempt(index, attempt)
    committer.setup_task(task)
    fs, base = committer.filesystem(task), committer.work_path(task)
    for rel, data in files.items():
        fs.pipe_file(f"{base}/{rel}", data)
    return committer.commit_task(task)


def killed_commit(dest: str, config: dict[str, str], job: JobContext,
                  messages: list[dict[str, Any]]) -> None:
    """Job commit in a driver process that is SIGKILLed after merging the first task."""
    done = subprocess.run([sys.executable, "-c", KILLED_DRIVER], text=True, capture_output=True,
                          input=json.dumps({"dest": dest, "config": config, "job": job.to_dict(),
                                            "messages": messages}))
    assert done.returncode == -9, done.stderr


@pytest.fixture
def dest(tmp_path: Path) -> str:
    return f"file://{tmp_path}/out"


@pytest.mark.parametrize("mode", ["fail", "append", "replace"])
def test_v1_next_job_attempt_finishes_an_interrupted_merge(dest: str, mode: str) -> None:
    config = {"outcommit.committer.conflict-mode": mode}
    store = outcommit.open_store(dest)
    root = store.strip(dest)
    old = {} if mode == "fail" else {"old.txt": b"before the job"}
    for rel, data in old.items():
        store.write_bytes(f"{root}/{rel}", data)
    committer = outcommit.create_committer(dest, config, "v1")
    job = JobContext(dest, config=committer.config)
    committer.setup_job(job)
    messages = [run_task(committer, job, i, files_of(i)) for i in range(2)]

    killed_commit(dest, config, job, messages)
    # Task 0 is in the destination, task 1 is not: the driver died in between.
    assert set(visible_files(store, root)) == {*({} if mode == "replace" else old), *files_of(0)}

    # The restarted driver: same job id, next attempt, tasks recovered, commit resumed.
    restarted = outcommit.create_committer(dest, config, "v1")
    job1 = job.next_attempt()
    restarted.setup_job(job1)  # 'fail' must not take the job's own files for foreign data
    assert all(restarted.recover_task(job1.task_attempt(i)) for i in range(2))
    summary = restarted.commit_job(job1)

    expected = {**files_of(0), **files_of(1), **({} if mode == "replace" else old)}
    assert visible_files(store, root) == expected
    report = outcommit.load_success(store, f"{root}/_SUCCESS")
    assert report.success and report.jobId == job.job_id
    # Every file of the job is reported, also those the dead driver had already merged.
    assert sorted(report.filenames) == sorted(store.url(f"{root}/{rel}") for rel in
                                              {**files_of(0), **files_of(1)})
    assert summary.metrics["files.committed"] == 4
    assert leftovers(store, root) == []


def test_v1_abort_after_an_interrupted_merge_removes_what_it_published(dest: str) -> None:
    store = outcommit.open_store(dest)
    root = store.strip(dest)
    store.write_bytes(f"{root}/old.txt", b"before the job")
    committer = outcommit.create_committer(dest, {}, "v1")
    job = JobContext(dest)
    committer.setup_job(job)
    messages = [run_task(committer, job, i, files_of(i)) for i in range(2)]
    killed_commit(dest, {}, job, messages)
    assert set(files_of(0)) <= set(visible_files(store, root))

    cleaner = outcommit.create_committer(dest, {}, "v1")
    cleaner.abort_job(job)
    cleaner.cleanup_job(job)
    # Nothing of the failed job stays visible; what was there before it stays.
    assert visible_files(store, root) == {"old.txt": b"before the job"}
    assert leftovers(store, root) == []


def test_v1_repeated_task_commit_of_one_attempt_keeps_its_files(dest: str) -> None:
    store = outcommit.open_store(dest)
    committer = outcommit.create_committer(dest, {}, "v1")
    job = JobContext(dest)
    committer.setup_job(job)
    first = run_task(committer, job, 0, files_of(0))
    # The first commit's result was lost; the same attempt's commit is called again.
    again = committer.commit_task(job.task_attempt(0))
    assert sorted(f["path"] for f in again["files"]) == sorted(f["path"] for f in first["files"])
    committer.commit_job(job, [again])
    assert visible_files(store, store.strip(dest)) == files_of(0)


def test_v2_repeated_job_commit_succeeds(dest: str) -> None:
    """Hadoop's testCommitterWithDuplicatedCommit: v2 may commit a job twice."""
    committer = outcommit.create_committer(dest, {}, "v2")
    job = JobContext(dest)
    committer.setup_job(job)
    message = run_task(committer, job, 0, files_of(0))
    first = committer.commit_job(job, [message])
    second = committer.commit_job(job, [message])
    assert (second.jobId, second.success, second.filenames) == (job.job_id, True, first.filenames)


def test_v1_repeated_job_commit_after_success_returns_its_report(dest: str) -> None:
    """Hadoop's testCommitterWithDuplicatedCommit has v1's second commit of a job fail.
    Here v1 declares job-commit.repeatable: a call that repeats a finished commit (its
    driver may have died deleting the job's state) returns the job's _SUCCESS report."""
    committer = outcommit.create_committer(dest, {}, "v1")
    job = JobContext(dest)
    committer.setup_job(job)
    message = run_task(committer, job, 0, files_of(0))
    first = committer.commit_job(job, [message])
    again = outcommit.create_committer(dest, {}, "v1").commit_job(job, [message])
    assert again.jobId == job.job_id and again.filenames == first.filenames
    assert visible_files(outcommit.open_store(dest), outcommit.open_store(dest).strip(dest)) == files_of(0)
    # Another job's commit is still refused: no _SUCCESS names it.
    with pytest.raises(outcommit.JobCommitError, match="not active"):
        committer.commit_job(JobContext(dest), [message])


def test_v2_job_commit_of_another_job_is_still_refused(dest: str) -> None:
    committer = outcommit.create_committer(dest, {}, "v2")
    job = JobContext(dest)
    committer.setup_job(job)
    committer.commit_job(job, [run_task(committer, job, 0, files_of(0))])
    with pytest.raises(outcommit.JobCommitError, match="not active"):
        committer.commit_job(JobContext(dest), [])


@pytest.mark.parametrize("name", ["v1", "v2"])
def test_a_merge_rename_that_happened_but_raised_is_not_a_failed_job(dest: str, name: str) -> None:
    """The rename took effect and its response was lost: merging must carry on (fault matrix
    cell ``store/rename/job-rename/ambiguous-x1``), not fail with no source left."""
    from outcommit.testing.faults import Fault, FaultInjectingStore

    def lost_response(message: str) -> BaseException:
        return ConnectionResetError(f"connection reset after the rename ({message})")

    def lose_next_rename_response() -> None:
        store.faults[:] = [Fault(op, when="after", times=1, error=lost_response)
                           for op in ("rename_file", "rename_dir")]

    inner = outcommit.open_store(dest)
    root = inner.strip(dest)
    store = FaultInjectingStore(inner)
    committer = outcommit.create_committer(dest, {"outcommit.retry.backoff-ms": "0"}, name,
                                           store=store)
    job = JobContext(dest, config=committer.config)
    committer.setup_job(job)
    if name == "v2":  # v2 merges at task commit, v1 at job commit
        lose_next_rename_response()
    messages = [run_task(committer, job, i, files_of(i)) for i in range(2)]
    if name == "v1":
        lose_next_rename_response()
    committer.commit_job(job, messages)
    assert sum(f.fired for f in store.faults) == 1
    assert visible_files(inner, root) == {**files_of(0), **files_of(1)}
    report = outcommit.load_success(inner, f"{root}/_SUCCESS")
    assert sorted(report.filenames) == sorted(inner.url(f"{root}/{rel}")
                                              for rel in {**files_of(0), **files_of(1)})
    assert leftovers(inner, root) == []


def test_v2_success_without_messages_lists_only_the_jobs_files(dest: str) -> None:
    """Hadoop's flow (job commit discovers the tasks): _SUCCESS lists what this job
    published, not the data of earlier jobs in the destination."""
    config = {"outcommit.committer.conflict-mode": "append"}
    store = outcommit.open_store(dest)
    root = store.strip(dest)
    store.write_bytes(f"{root}/old.txt", b"before the job")
    committer = outcommit.create_committer(dest, config, "v2")
    job = JobContext(dest, config=committer.config)
    committer.setup_job(job)
    for i in range(2):
        run_task(committer, job, i, files_of(i))
    summary = committer.commit_job(job)  # no messages
    ours = sorted(store.url(f"{root}/{rel}") for rel in {**files_of(0), **files_of(1)})
    assert sorted(summary.filenames) == ours
    assert sorted(outcommit.load_success(store, f"{root}/_SUCCESS").filenames) == ours
    assert visible_files(store, root) == {"old.txt": b"before the job", **files_of(0), **files_of(1)}
    assert leftovers(store, root) == []


def test_v2_job_commit_without_messages_reads_the_task_records_threads_at_once(dest: str) -> None:
    """Hadoop's flow: v2's job commit reads one record per task, not one after another
    (1,000 tasks would be 1,000 round trips of job commit)."""
    from outcommit.testing.faults import Fault, FaultInjectingStore

    tasks = 4
    config = {"outcommit.committer.threads": str(tasks)}
    together = threading.Barrier(tasks, timeout=60)  # breaks if a read waits for another's
    store = FaultInjectingStore(outcommit.open_store(dest), [Fault(
        "load_json", path_contains="/_tasks/", times=0, predicate=lambda _op, _args: together.wait() < 0)])
    committer = outcommit.create_committer(dest, config, "v2", store=store)
    job = JobContext(dest, config=committer.config)
    committer.setup_job(job)
    expected: dict[str, bytes] = {}
    for index in range(tasks):
        run_task(committer, job, index, files_of(index))
        expected.update(files_of(index))
    committer.commit_job(job)  # no messages: the records are read
    assert store.calls["load_json"] >= tasks
    root = store.strip(dest)
    assert visible_files(store, root) == expected
    assert leftovers(store, root) == []
