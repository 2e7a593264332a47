"""Task attempts without engine messages: claims, aborts, local staging directories."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from s3_helpers import outcome, run_task, start

import outcommit
from outcommit import JobContext
from outcommit.testing.conformance import leftovers, visible_files

pytestmark = pytest.mark.s3


@pytest.fixture
def config(s3_config):
    return {**s3_config, "outcommit.committer.unique-filenames": "false",
            "outcommit.s3.abort-pending-uploads": "false"}


def write(committer, task, files):
    committer.setup_task(task)
    fs, base = committer.filesystem(task), committer.work_path(task)
    for rel, data in files.items():
        fs.pipe_file(f"{base}/{rel}", data)


@pytest.mark.parametrize("name", ["magic", "directory", "partitioned"])
def test_an_aborted_attempt_releases_its_claim_hadoop_17258(name, config, s3_root):
    url = f"{s3_root}/claim"
    committer, job = start(url, config, name)
    first, retry = job.task_attempt(0, 0), job.task_attempt(0, 1)
    write(committer, first, {"a.txt": b"attempt 0"})
    committer.commit_task(first)
    committer.abort_task(first)  # the driver gave up on it (no allow_task_commit record)
    write(committer, retry, {"a.txt": b"attempt 1"})
    committer.commit_task(retry)
    committer.commit_job(job)
    store = outcommit.open_store(url, config)
    assert visible_files(store, store.strip(url)) == {"a.txt": b"attempt 1"}
    assert leftovers(store, store.strip(url)) == []  # attempt 0's uploads were aborted, no sweep


@pytest.mark.parametrize("name", ["directory", "partitioned"])
def test_staging_local_directories_are_removed(name, config, s3_root):
    url = f"{s3_root}/local"
    committer, job = start(url, config, name)
    committed, aborted = job.task_attempt(0), job.task_attempt(1)
    write(committer, committed, {"p=1/a.txt": b"a"})
    write(committer, aborted, {"p=2/b.txt": b"b"})
    message = committer.commit_task(committed)
    assert not os.path.exists(committer.work_path(committed))
    committer.abort_task(aborted)
    assert not os.path.exists(committer.work_path(aborted))
    committer.commit_job(job, [message])
    assert not os.path.exists(committer.local_job_dir(job))
    store = outcommit.open_store(url, config)
    assert visible_files(store, store.strip(url)) == {"p=1/a.txt": b"a"}
    assert leftovers(store, store.strip(url)) == []


@pytest.mark.parametrize("name", ["directory", "partitioned"])
def test_replace_deletes_nothing_when_an_upload_is_already_gone(name, config, s3_root):
    url = f"{s3_root}/gone"
    store = outcommit.open_store(url, config)
    store.write_bytes(f"{store.strip(url)}/p=1/old.txt", b"old")
    committer = outcommit.create_committer(url, {**config, "outcommit.committer.conflict-mode": "replace"},
                                           name)
    job = JobContext(url, config=committer.config)
    committer.setup_job(job)
    task = job.task_attempt(0)
    write(committer, task, {"p=1/new.txt": b"new", "p=1/other.txt": b"o"})
    message = committer.commit_task(task)
    victim = message["commits"][0]
    store.multipart().abort(f"{victim['bucket']}/{victim['destinationKey']}", victim["uploadId"])
    with pytest.raises(outcommit.CommitError, match="no longer pending"):
        committer.commit_job(job, [message])
    assert visible_files(store, store.strip(url)) == {"p=1/old.txt": b"old"}  # nothing lost
    committer.abort_job(job)
    assert leftovers(store, store.strip(url)) == []


@pytest.mark.parametrize("name", ["magic", "directory"])
def test_recovering_from_a_corrupt_pendingset_is_a_corrupt_file_error(name, config, s3_root):
    url = f"{s3_root}/recover"
    committer, job = start(url, config, name)
    task = job.task_attempt(0)
    write(committer, task, {"a.txt": b"a"})
    published = committer.meta.strip(committer.commit_task(task)["pendingset"])
    committer.meta.write_bytes(published, b"{garbage")
    next_job = JobContext(url, job_id=job.job_id, attempt=1, config=committer.config)
    committer.setup_job(next_job)
    with pytest.raises(outcommit.CorruptFileError, match="not valid JSON"):
        committer.recover_task(next_job.task_attempt(0))
    committer.abort_job(next_job)


# A driver in its own process: job commit of the job given on stdin, killed (SIGKILL)
# right after its first multipart completion took effect.
KILLED_DRIVER = """
import json, sys
import outcommit
from outcommit.testing.faults import Fault, FaultInjectingStore, kill_process
args = json.load(sys.stdin)
store = FaultInjectingStore(outcommit.open_store(args["url"], args["config"]),
                            [Fault("multipart.complete", when="after", error=kill_process)])
committer = outcommit.create_committer(args["url"], args["config"], args["name"], store=store)
committer.commit_job(outcommit.JobContext.from_dict(args["job"]), args["messages"])
"""


@pytest.mark.parametrize("name", ["magic", "directory"])
def test_next_job_attempt_recovers_under_fail_after_the_driver_died_mid_commit(name, config, s3_root):
    """Conflict mode 'fail' must not take the job's own completed uploads for foreign data
    (fault matrix cell ``driver/publish@1/recover/fail``)."""
    url = f"{s3_root}/recover-fail"
    config = {**config, "outcommit.committer.conflict-mode": "fail", "outcommit.committer.threads": "1"}
    committer, job = start(url, config, name)
    files = [{f"part-{i}.txt": f"task {i}".encode()} for i in range(2)]
    messages = [run_task(committer, job, i, files[i]) for i in range(2)]
    died = subprocess.run([sys.executable, "-c", KILLED_DRIVER], text=True, capture_output=True,
                          input=json.dumps({"url": url, "config": config, "name": name,
                                            "job": job.to_dict(), "messages": messages}))
    assert died.returncode == -9, died.stderr
    assert len(outcome(url, config)[0]) == 1  # one upload completed before the kill

    restarted = outcommit.create_committer(url, config, name)
    next_job = job.next_attempt()
    restarted.setup_job(next_job)
    assert all(restarted.recover_task(next_job.task_attempt(i)) for i in range(2))
    restarted.commit_job(next_job)
    assert outcome(url, config) == ({**files[0], **files[1]}, [])
