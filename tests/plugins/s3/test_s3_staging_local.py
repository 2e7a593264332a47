"""The staging committers' local side: which files a task commit uploads, a lost staging
directory, an unusable ``outcommit.s3.staging.tmp-dir``."""

from __future__ import annotations

import re
import shutil

import pytest
from s3_helpers import run_task, start

import outcommit
from outcommit.errors import ConfigError, TaskCommitError
from outcommit.read import committed_files
from outcommit_s3.staging.committer import StagingDirError

pytestmark = pytest.mark.s3

STAGING = ["directory", "partitioned"]


@pytest.fixture
def config(s3_config):
    return {**s3_config, "outcommit.committer.unique-filenames": "false"}


def keys(url, config):
    store = outcommit.open_store(url, config)
    dest = store.strip(url)
    return sorted(info.path[len(dest) + 1:] for info in store.list_files(dest))


@pytest.mark.parametrize("name", STAGING)
def test_every_file_is_committed_whatever_its_name(name, config, s3_root):
    """A ``_src=a`` partition is data (readers and Spark read it); ``_x.csv`` and
    ``.part-0.csv.crc`` are published too, as v1, v2, manifest and magic publish them."""
    url = f"{s3_root}/t"
    committer, job = start(url, config, name)
    written = {"_src=a/part-0.csv": b"a", "src=b/part-0.csv": b"b", "_x.csv": b"x",
               ".part-0.csv.crc": b"c", "_src=a/_d/.e/f.csv": b"f"}
    report = committer.commit_job(job, [run_task(committer, job, 0, written)])
    assert report.success and report.metrics["files.committed"] == len(written)
    assert keys(url, config) == sorted([*written, "_SUCCESS"])
    # The reader's rule decides what is hidden, not the committer: the partition is data
    assert committed_files(url, config, require_success=False) == [
        f"{url}/_src=a/part-0.csv", f"{url}/src=b/part-0.csv"]
    assert committer.store.multipart().list_pending(committer.dest) == []


@pytest.mark.parametrize("name", STAGING)
@pytest.mark.parametrize("reserved", ["_SUCCESS", "_temporary/x.csv", "__magic/x.csv",
                                      "__staging_job-1/x.csv"])
def test_a_file_on_a_reserved_name_fails_the_task_before_uploading(name, reserved, config, s3_root):
    url = f"{s3_root}/t"
    committer, job = start(url, config, name)
    with pytest.raises(TaskCommitError, match="reserves"):
        run_task(committer, job, 0, {"ok.csv": b"1", reserved: b"2"})
    assert committer.store.multipart().list_pending(committer.dest) == []
    committer.abort_job(job)
    assert keys(url, config) == []


@pytest.mark.parametrize("name", STAGING)
def test_a_lost_staging_directory_fails_the_task_and_the_job_aborts_clean(name, config, s3_root):
    """setup_task creates the directory: gone at task commit (a tmp cleaner, a lost disk)
    means the attempt's output is lost, not that the task wrote nothing."""
    url = f"{s3_root}/t"
    committer, job = start(url, config, name)
    done = run_task(committer, job, 1, {"other.csv": b"1"})  # an earlier task's pending upload
    task = job.task_attempt(0)
    committer.setup_task(task)
    committer.filesystem(task).pipe_file(f"{committer.work_path(task)}/part-0.csv", b"0")
    shutil.rmtree(committer.work_path(task))
    expected = f"{re.escape(committer.work_path(task))} is gone.*output is lost"
    with pytest.raises(TaskCommitError, match=expected):
        committer.needs_task_commit(task)  # never a quiet False: the engine would skip the commit
    with pytest.raises(TaskCommitError, match=expected):
        committer.commit_task(task)
    committer.abort_task(task)
    assert done["files"] == 1
    committer.abort_job(job)
    assert committer.store.multipart().list_pending(committer.dest) == []
    assert keys(url, config) == []


@pytest.mark.parametrize("name", STAGING)
def test_a_repeated_task_commit_is_not_lost_output(name, config, s3_root):
    """Task commit removes the staging directory: a repeat answers the same message."""
    url = f"{s3_root}/t"
    committer, job = start(url, config, name)
    first = run_task(committer, job, 0, {"a.csv": b"a"})
    task = job.task_attempt(0)
    assert committer.needs_task_commit(task)
    again = committer.commit_task(task)
    assert [c["uploadId"] for c in again["commits"]] == [c["uploadId"] for c in first["commits"]]
    report = committer.commit_job(job, [again])
    assert report.metrics["files.committed"] == 1 and keys(url, config) == ["_SUCCESS", "a.csv"]


@pytest.mark.parametrize("name", STAGING)
@pytest.mark.parametrize("kind", ["a regular file", "under a regular file"])
def test_an_unusable_tmp_dir_is_named_at_task_setup(name, kind, config, s3_root, tmp_path):
    plain = tmp_path / "plain"
    plain.write_bytes(b"x")
    bad = str(plain if kind == "a regular file" else plain / "staging")
    committer, job = start(f"{s3_root}/t", config, name, **{"outcommit.s3.staging.tmp-dir": bad})
    task = job.task_attempt(0)
    named = rf"outcommit\.s3\.staging\.tmp-dir .*= '{re.escape(bad)}'"
    with pytest.raises(StagingDirError, match=named) as e:
        committer.setup_task(task)
    assert isinstance(e.value, ConfigError) and isinstance(e.value, OSError)
    committer.abort_job(job)
