"""The pending-upload sweep after job commit, replace deletions, local staging cleanup."""

from __future__ import annotations

import logging
import os

import pytest
from s3_helpers import run_task, start

import outcommit
from outcommit import JobContext
from outcommit.errors import JobCommitError
from outcommit.testing.conformance import leftovers, visible_files
from outcommit.testing.faults import Fault, FaultInjectingStore

pytestmark = pytest.mark.s3


@pytest.fixture
def config(s3_config):
    return {**s3_config, "outcommit.committer.unique-filenames": "false"}


@pytest.mark.parametrize("name", ["magic", "directory"])
def test_a_failing_sweep_does_not_fail_a_complete_job_commit(name, config, s3_root):
    url = f"{s3_root}/sweepfail"
    store = FaultInjectingStore(outcommit.open_store(url, config), [Fault("multipart.list_pending")])
    committer, job = start(url, config, name, store=store)
    message = run_task(committer, job, 0, {"a.txt": b"a"})
    run_task(committer, job, 1, {"stale.txt": b"s"})  # an attempt the engine did not commit
    summary = committer.commit_job(job, [message])
    assert summary.success and summary.diagnostics["uploads.sweep"].startswith("failed")
    assert summary.metrics["uploads.pending.remaining"] == 0  # own leftovers aborted anyway
    real = outcommit.open_store(url, config)
    assert visible_files(real, real.strip(url)) == {"a.txt": b"a"}
    assert leftovers(real, real.strip(url)) == []


def test_a_skipped_sweep_is_reported_and_a_crashed_job_can_be_aborted_by_id(config, s3_root, caplog):
    url = f"{s3_root}/skipped"
    crashed, crashed_job = start(url, config)
    run_task(crashed, crashed_job, 0, {"lost.txt": b"l"})   # then its driver dies
    committer, job = start(url, config)
    message = run_task(committer, job, 0, {"a.txt": b"a"})
    with caplog.at_level(logging.WARNING, logger="outcommit"):
        summary = committer.commit_job(job, [message])
    assert summary.diagnostics["uploads.sweep"].startswith("skipped")
    assert crashed_job.job_id in summary.diagnostics["uploads.sweep"]
    assert summary.metrics["uploads.pending.remaining"] == 1
    assert "1 uploads remain pending" in caplog.text
    # The documented way out: abort the crashed job by its id.
    outcommit.create_committer(url, config, "magic").abort_job(JobContext(url, job_id=crashed_job.job_id))
    store = outcommit.open_store(url, config)
    assert visible_files(store, store.strip(url)) == {"a.txt": b"a"}
    assert leftovers(store, store.strip(url)) == []


def test_replace_fails_when_s3_refuses_to_delete_old_data(config, s3_root):
    url = f"{s3_root}/undeletable"
    store = outcommit.open_store(url, config)
    store.write_bytes(f"{store.strip(url)}/old.txt", b"old")
    committer, job = start(url, config, "directory", **{"outcommit.committer.conflict-mode": "replace"})
    message = run_task(committer, job, 0, {"new.txt": b"new"})

    def refuse(parsed, **_):  # S3 answers 200 with per-key errors (e.g. AccessDenied)
        deleted = parsed.pop("Deleted", None) or []
        parsed["Errors"] = [{"Key": d["Key"], "Code": "AccessDenied", "Message": "denied"}
                            for d in deleted] or [{"Key": "old.txt", "Code": "AccessDenied"}]

    committer.store.client.meta.events.register("after-call.s3.DeleteObjects", refuse)
    with pytest.raises(JobCommitError, match="AccessDenied"):
        committer.commit_job(job, [message])
    committer.store.client.meta.events.unregister("after-call.s3.DeleteObjects", refuse)
    assert "new.txt" not in visible_files(store, store.strip(url))  # nothing committed on top
    committer.abort_job(job)
    assert leftovers(store, store.strip(url)) == []


def test_staging_local_directory_goes_even_when_the_store_delete_fails(config, s3_root):
    url = f"{s3_root}/local"
    store = FaultInjectingStore(outcommit.open_store(url, config),
                                [Fault("delete", path_contains="__staging_job-", times=-1)])
    committer, job = start(url, config, "directory", store=store)
    task = job.task_attempt(0)
    committer.setup_task(task)
    committer.filesystem(task).pipe_file(f"{committer.work_path(task)}/a.txt", b"a")
    assert os.path.isdir(committer.local_job_dir(job))
    committer.abort_job(job)  # never raises
    assert not os.path.exists(committer.local_job_dir(job))
