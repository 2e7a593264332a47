"""Job commit's completions in several processes (``outcommit.job-commit.processes``, issue 30).

Real worker processes (spawned) complete real uploads on the moto server; the driver
checks every upload's answer before ``_SUCCESS``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from s3_helpers import outcome, run_task, start

import outcommit
from outcommit import load_success
from outcommit.errors import CommitError
from outcommit_devtools.sparkcluster import wait_until

pytestmark = pytest.mark.s3

FAN_OUT = {"outcommit.job-commit.processes": "2"}


def files_of(task: int) -> dict[str, bytes]:
    return {f"day={d}/part-{task}.bin": bytes([65 + task]) * (100 + d) for d in range(3)}


def test_a_job_commit_in_two_processes_completes_every_file(s3_config: dict[str, Any], s3_root: str) -> None:
    url = f"{s3_root}/fanned"
    committer, job = start(url, s3_config, **FAN_OUT)
    messages = [run_task(committer, job, i, files_of(i)) for i in range(4)]
    summary = committer.commit_job(job, messages)
    expected = {k: v for i in range(4) for k, v in files_of(i).items()}
    assert outcome(url, s3_config) == (expected, [])
    store = outcommit.open_store(url, s3_config)
    assert sorted(load_success(store, f"{store.strip(url)}/_SUCCESS").filenames) == sorted(summary.filenames)
    assert len(summary.filenames) == 12 and summary.success


def test_uploads_completed_before_are_completed_again_without_harm(s3_config: dict[str, Any],
                                                                  s3_root: str) -> None:
    """A commit interrupted after some completions, run again: completion is idempotent."""
    url = f"{s3_root}/again"
    committer, job = start(url, s3_config, **FAN_OUT)
    messages = [run_task(committer, job, i, files_of(i)) for i in range(2)]
    first = committer.mp
    for commit in messages[0]["commits"][:2]:
        first.complete(f"{commit['bucket']}/{commit['destinationKey']}", commit["uploadId"], commit["etags"])
    committer.commit_job(job, messages)
    assert outcome(url, s3_config) == ({k: v for i in range(2) for k, v in files_of(i).items()}, [])


def test_an_upload_gone_fails_the_commit_before_success(s3_config: dict[str, Any], s3_root: str) -> None:
    """An upload aborted behind the job's back: its worker's error reaches the driver,
    which fails the commit without _SUCCESS (the check that every upload answered)."""
    url = f"{s3_root}/gone"
    committer, job = start(url, s3_config, **FAN_OUT)
    messages = [run_task(committer, job, i, files_of(i)) for i in range(2)]
    lost = messages[1]["commits"][0]
    committer.mp.abort(f"{lost['bucket']}/{lost['destinationKey']}", lost["uploadId"])
    with pytest.raises(CommitError, match=r"1 of 6 uploads could not be completed, e\.g\. .*part-1\.bin"):
        committer.commit_job(job, messages)
    store = outcommit.open_store(url, s3_config)
    assert store.info(f"{store.strip(url)}/_SUCCESS") is None
    committer.abort_job(job)
    assert outcome(url, s3_config) == ({}, [])


# A driver script, as a user writes one: commit_job with the given fan-out of one task's files.
DRIVER = """
import json
import outcommit
from outcommit import JobContext
args = json.loads({args!r})
committer = outcommit.create_committer(args["url"], args["config"], "magic")
job = JobContext(args["url"], config=committer.config)
committer.setup_job(job)
task = job.task_attempt(0)
committer.setup_task(task)
fs, base = committer.filesystem(task), committer.work_path(task)
for rel, size in args["files"].items():
    fs.pipe_file(f"{{base}}/{{rel}}", b"x" * size)
messages = [committer.commit_task(task)]
print("committing", flush=True)
{call}
"""


def driver_script(tmp_path: Path, url: str, config: dict[str, Any], files: dict[str, int],
                  guarded: bool) -> Path:
    args = json.dumps({"url": url, "config": config, "files": files})
    call = 'if __name__ == "__main__":\n    committer.commit_job(job, messages)' if guarded \
        else "committer.commit_job(job, messages)"
    script = tmp_path / ("guarded.py" if guarded else "unguarded.py")
    script.write_text(DRIVER.format(args=args, call=call))
    return script


def pending(url: str, config: dict[str, Any]) -> list[str]:
    store = outcommit.open_store(url, config)
    return [u.path for u in store.multipart().list_pending(store.strip(url) + "/")]  # type: ignore[union-attr]


def test_a_driver_script_without_the_main_guard_is_refused_before_any_process_starts(
        s3_config: dict[str, Any], s3_root: str, tmp_path: Path) -> None:
    """Spawned processes import the driver's script again: one without the guard would run
    its job again in each (more uploads), then die starting processes of its own. Refused
    first, with the fix named; only this job's uploads exist, none completed."""
    url = f"{s3_root}/unguarded"
    files = {f"day={d}/part-0.bin": 100 for d in range(3)}
    script = driver_script(tmp_path, url, {**s3_config, **FAN_OUT}, files, guarded=False)
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert run.returncode != 0
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith("outcommit.errors.JobCommitError: job commit of "), last
    assert (f"failed: outcommit.job-commit.processes=2: the driver's script {script} has no "
            '`if __name__ == "__main__":` guard') in last, last
    assert "set outcommit.job-commit.processes=1" in last
    assert outcome(url, s3_config)[0] == {}
    assert len(pending(url, s3_config)) == 3  # this job's, no second run's


def worker_pids(driver: int) -> list[int]:
    """The driver's spawned worker processes (not multiprocessing's resource tracker)."""
    children = Path(f"/proc/{driver}/task/{driver}/children").read_text().split()
    return [int(p) for p in children
            if b"spawn_main" in Path(f"/proc/{p}/cmdline").read_bytes()]


def alive(pid: int) -> bool:
    """Running (a zombie has finished: its parent, killed, cannot reap it until init does)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_worker_stops_when_its_driver_is_killed(s3_config: dict[str, Any], s3_root: str,
                                                  tmp_path: Path) -> None:
    """SIGKILL of the driver mid-commit: its worker stops before its next completion (nobody
    reads its answers) instead of completing the rest and then waiting forever for work."""
    url = f"{s3_root}/orphan"
    files = {f"day=0/part-{i}.bin": 10 for i in range(40)}  # one prefix: one worker
    config = {**s3_config, **FAN_OUT, "outcommit.job-commit.prefix-rate": "2"}
    script = driver_script(tmp_path, url, config, files, guarded=True)
    driver = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    workers: list[int] = []
    try:
        assert driver.stdout is not None and driver.stdout.readline() == "committing\n"
        wait_until(lambda: outcome(url, s3_config)[0], 120, "the worker's first completion")
        workers = worker_pids(driver.pid)
        assert len(workers) == 1
        driver.kill()
        driver.wait()
        wait_until(lambda: not alive(workers[0]), 60, "the orphaned worker to stop")
        assert len(outcome(url, s3_config)[0]) < len(files)
    finally:
        for pid in workers:  # without the fix the worker waits forever: end it
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        if driver.poll() is None:
            driver.kill()
            driver.wait()
