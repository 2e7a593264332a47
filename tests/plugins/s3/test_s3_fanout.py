"""Job commit's completions in several processes (``outcommit.job-commit.processes``, issue 30).

Real worker processes (spawned) complete real uploads on the moto server; the driver
checks every upload's answer before ``_SUCCESS``.
"""

from __future__ import annotations

from typing import Any

import pytest
from s3_helpers import outcome, run_task, start

import outcommit
from outcommit import load_success
from outcommit.errors import CommitError

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
