"""The pending-upload sweep after job commit, replace deletions, local staging cleanup."""

from __future__ import annotations

import logging
import os
import threading
import uuid
from datetime import timedelta
from email.utils import parsedate_to_datetime

import pytest
from s3_helpers import outcome, run_task, start

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


def test_replace_checks_its_uploads_after_listing_the_destination(config, s3_root):
    """The check that every upload is still pending (before old data goes) is listed
    after the destination, not beside it: an upload aborted while a large destination is
    listed (a lifecycle rule, 'outcommit uploads abort') is found, and nothing is deleted.
    Listed beside it (found in review), the check could predate the abort: the old files
    were deleted, the completion failed, and neither old nor new data was left."""
    url = f"{s3_root}/aborted-meanwhile"
    store = outcommit.open_store(url, config)
    store.write_bytes(f"{store.strip(url)}/old.txt", b"old")
    committer, job = start(url, config, "magic", **{"outcommit.committer.conflict-mode": "replace"})
    message = run_task(committer, job, 0, {"new.txt": b"new"})
    listed, checked = [], []
    list_files, list_pending = committer.store.list_files, committer.mp.list_pending

    def listing(path, *args, **kwargs):
        found = list_files(path, *args, **kwargs)
        if path.rstrip("/") == committer.dest and not listed:
            for upload in list_pending(committer.dest + "/"):  # aborted while it was listed
                committer.mp.abort(upload.path, upload.upload_id)
            listed.append(True)
        return found

    def pending(*args, **kwargs):
        checked.append(bool(listed))  # was the destination listed when this began?
        return list_pending(*args, **kwargs)

    committer.store.list_files, committer.mp.list_pending = listing, pending
    with pytest.raises(JobCommitError, match=r"no longer pending.*nothing was deleted"):
        committer.commit_job(job, [message])
    assert checked[0] is True
    assert visible_files(store, store.strip(url)) == {"old.txt": b"old"}
    committer.abort_job(job)
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


# -- whose uploads a sweep may abort -------------------------------------------------------------
@pytest.mark.parametrize("name", ["magic", "directory"])
@pytest.mark.parametrize("first", ["parent", "child"])
def test_nested_destinations_never_abort_each_others_uploads(name, first, config, s3_root):
    """A job writing to out/ and one writing to out/sub/: each commit sweeps only its own."""
    parent_url, child_url = f"{s3_root}/out", f"{s3_root}/out/sub"
    parent, parent_job = start(parent_url, config, name)
    child, child_job = start(child_url, config, name)
    # The parent also writes a partition named 'sub': its upload lives under the child too.
    parent_message = run_task(parent, parent_job, 0, {"p.txt": b"p", "sub/q.txt": b"q"})
    child_message = run_task(child, child_job, 0, {"c.txt": b"c"})
    jobs = {"parent": (parent, parent_job, parent_message), "child": (child, child_job, child_message)}
    order = [first, "child" if first == "parent" else "parent"]
    for who in order:
        committer, job, message = jobs[who]
        committer.commit_job(job, [message])
    store = outcommit.open_store(parent_url, config)
    assert visible_files(store, store.strip(child_url)) == {"c.txt": b"c", "q.txt": b"q"}
    assert visible_files(store, store.strip(parent_url)) == {
        "p.txt": b"p", "sub/q.txt": b"q", "sub/c.txt": b"c"}
    assert leftovers(store, store.strip(parent_url)) == []


@pytest.mark.parametrize("name", ["magic", "directory"])
def test_a_bucket_root_job_leaves_other_jobs_uploads_alone(name, s3_server, s3_config):
    bucket = f"root-{uuid.uuid4().hex[:12]}"
    s3_server.create_bucket(bucket)
    config = {**s3_config, "outcommit.committer.unique-filenames": "false"}
    table_url, root_url = f"s3://{bucket}/table", f"s3://{bucket}"
    table, table_job = start(table_url, config, name)
    root, root_job = start(root_url, config, name)
    table_message = run_task(table, table_job, 0, {"t.txt": b"t"})
    root.commit_job(root_job, [run_task(root, root_job, 0, {"r.txt": b"r"})])
    table.commit_job(table_job, [table_message])  # its upload survived the root job's sweep
    store = outcommit.open_store(root_url, config)
    assert visible_files(store, bucket) == {"r.txt": b"r", "table/t.txt": b"t"}
    assert leftovers(store, bucket) == []


def test_a_file_closed_while_job_commit_ends_the_job_leaves_no_upload(config, s3_root):
    """A losing attempt closes a file during job commit: its upload is aborted, not leaked."""
    url = f"{s3_root}/late-close"
    store = FaultInjectingStore(outcommit.open_store(url, config), [])
    committer, job = start(url, config, "magic", store=store)
    message = run_task(committer, job, 0, {"a.txt": b"a"})
    loser = job.task_attempt(0, 1)
    committer.setup_task(loser)
    closed: list[str] = []

    def loser_closes_a_file(operation: str, args: tuple) -> bool:
        # Right before job commit deletes the job marker, the loser finishes a file.
        if not closed:
            closed.append(args[0])
            try:
                committer.filesystem(loser).pipe_file(f"{committer.work_path(loser)}/late.txt", b"late")
            except outcommit.CommitError:
                pass  # refused: fine, as long as nothing stays pending
            # In memory, close() hands the upload to the attempt's pool: wait until it
            # exists on the store (one that starts later is the loser's abort's to remove).
            tracker = committer._tracker(loser)
            assert tracker is not None and not tracker.wait()
        return False

    store.add(Fault("delete", path_contains="_job.json", predicate=loser_closes_a_file))
    committer.commit_job(job, [message])
    assert closed, "job commit never ended the job"
    real = outcommit.open_store(url, config)
    assert visible_files(real, real.strip(url)) == {"a.txt": b"a"}
    assert leftovers(real, real.strip(url)) == []


@pytest.mark.parametrize("name", ["magic", "directory"])
def test_the_sweep_beside_the_completions_leaves_the_jobs_own_uploads_alone(name, config, s3_root):
    """The sweep runs while the uploads complete. Here every completion waits until it has
    finished, so its listing holds all of the job's uploads, still pending: it aborts only
    the upload that nobody will complete (an attempt the engine did not commit), and the
    job commits."""
    url = f"{s3_root}/beside-{name}"
    committer, job = start(url, config, name, **{"outcommit.committer.threads": "4"})
    files = {f"d={i}/f{i}.txt": f"file {i}".encode() for i in range(3)}
    messages = [run_task(committer, job, i, {rel: data}) for i, (rel, data) in enumerate(files.items())]
    run_task(committer, job, 3, {"stale.txt": b"s"})  # not committed: the sweep's to abort
    swept = threading.Event()
    sweep = committer.sweep

    def sweep_then_let_completions_go(*args: object) -> object:
        try:
            return sweep(*args)
        finally:
            swept.set()

    completed_before_the_sweep: list[bool] = []

    def before_completion(**_: object) -> None:
        if not swept.wait(30):  # an assertion here would only make the completion retry
            completed_before_the_sweep.append(True)

    committer.sweep = sweep_then_let_completions_go
    events = committer.store.client.meta.events
    events.register("before-call.s3.CompleteMultipartUpload", before_completion)
    try:
        summary = committer.commit_job(job, messages)
    finally:
        events.unregister("before-call.s3.CompleteMultipartUpload", before_completion)
    assert not completed_before_the_sweep, "the sweep did not run while the uploads were completing"
    assert summary.metrics["uploads.aborted.other"] == 1
    assert outcome(url, config) == (files, [])


def test_a_file_written_to_the_job_directory_after_its_listing_is_deleted_too(config, s3_root):
    """Job commit lists its directory while the uploads complete and deletes what it found
    after _SUCCESS, beside a second listing: a file a straggler saved in between (here,
    right after the first listing) is found by the second and deleted as well."""
    url = f"{s3_root}/late-state"
    committer, job = start(url, config)
    message = run_task(committer, job, 0, {"a.txt": b"a"})
    root = committer.layout(job).root
    bucket, _, root_key = root.partition("/")
    other = outcommit.open_store(url, config)  # not the committer's client: its hooks run inside
    saved: list[str] = []

    def straggler_saves_a_file(parsed: dict, **_: object) -> None:
        if not saved and str(parsed.get("Prefix", "")).startswith(root_key):
            saved.append(f"{root}/attempt-9/late.pendingset")
            other.write_bytes(saved[0], b"{}")

    events = committer.store.client.meta.events
    events.register("after-call.s3.ListObjectsV2", straggler_saves_a_file)
    try:
        committer.commit_job(job, [message])
    finally:
        events.unregister("after-call.s3.ListObjectsV2", straggler_saves_a_file)
    assert saved and bucket, "the job directory was never listed"
    assert outcome(url, config) == ({"a.txt": b"a"}, [])


# -- other tools' uploads: the sweep's scope -------------------------------------------------------
SCOPE = "outcommit.s3.abort-pending-uploads.scope"


class InitiationTimes:
    """What S3 lists as each pending upload's initiation time, put back on moto.

    moto 5.2.5 lists every upload as initiated 2010-11-10T20:48:33Z (a constant in its
    responses.py). Through botocore's event hooks on the clients a test uses, each
    CreateMultipartUpload is dated by the moto server's own clock (its answer's Date
    header: whole seconds, as the marker's Last-Modified) and the listing carries that
    time, less ``ages`` for an upload the test dates back (a leftover of a job that crashed
    an hour ago: the test cannot wait an hour).
    """

    def __init__(self, *stores):
        self.initiated = {}
        self.ages = {}
        for store in stores:
            events = store.client.meta.events
            events.register("after-call.s3.CreateMultipartUpload", self._dated,
                            unique_id=f"test-initiated-{id(self)}")
            events.register("after-call.s3.ListMultipartUploads", self._listed,
                            unique_id=f"test-listed-{id(self)}")

    def _dated(self, http_response, parsed, **_):
        self.initiated[parsed["UploadId"]] = parsedate_to_datetime(http_response.headers["Date"])

    def _listed(self, parsed, **_):
        for upload in parsed.get("Uploads", []):
            if upload["UploadId"] in self.initiated:
                upload["Initiated"] = (self.initiated[upload["UploadId"]]
                                       - self.ages.get(upload["UploadId"], timedelta(0)))


def other_tools_upload(store, path):
    """An upload another tool starts (a plain CreateMultipartUpload and one part)."""
    mp = store.multipart()
    upload = mp.initiate(path)
    mp.upload_part(path, upload, 1, b"another tool's bytes")
    return upload


def pending_ids(store, url):
    return {u.upload_id for u in store.multipart().list_pending(store.strip(url) + "/")}


@pytest.mark.parametrize("name", ["magic", "directory"])
def test_by_default_the_sweep_aborts_another_tools_upload_as_hadoop_does(name, config, s3_root):
    """Hadoop's fs.s3a.committer.abort.pending.uploads (default true): every pending upload
    under the destination, also one another tool started while the job ran."""
    url = f"{s3_root}/hadoop-{name}"
    committer, job = start(url, config, name)
    real = outcommit.open_store(url, config)
    other = other_tools_upload(real, f"{real.strip(url)}/other-tool/x.bin")
    summary = committer.commit_job(job, [run_task(committer, job, 0, {"a.txt": b"a"})])
    assert summary.metrics["uploads.aborted.other"] == 1 and summary.diagnostics["uploads.sweep"] == "done"
    assert other not in pending_ids(real, url)


@pytest.mark.parametrize("name", ["magic", "directory"])
@pytest.mark.parametrize("end", ["commit", "abort"])
def test_scope_before_job_spares_uploads_started_after_the_job_began(name, end, config, s3_root):
    """Issue 27: the sweep aborted every pending upload under the destination, one another
    tool had started a second ago included. With the scope before-job, an upload S3 dates
    at or after the job's start (its marker's Last-Modified: S3's clock) is spared; a
    leftover from before the job (an hour earlier) is still aborted."""
    url = f"{s3_root}/spare-{name}-{end}"
    real = outcommit.open_store(url, config)
    committer = outcommit.create_committer(url, {**config, SCOPE: "before-job"}, name)
    times = InitiationTimes(real, committer.store)
    leftover = other_tools_upload(real, f"{real.strip(url)}/crashed/old.bin")
    times.ages[leftover] = timedelta(hours=1)
    job = JobContext(url, config=committer.config)
    committer.setup_job(job)
    other = other_tools_upload(real, f"{real.strip(url)}/other-tool/x.bin")  # after it began
    message = run_task(committer, job, 0, {"a.txt": b"a"})
    run_task(committer, job, 1, {"stale.txt": b"s"})  # this job's own, not committed: aborted
    if end == "commit":
        summary = committer.commit_job(job, [message])
        # The other tool's and the job's own uncommitted one, which job commit aborts after.
        assert summary.diagnostics["uploads.sweep"] == (
            f"spared 2 uploads initiated after the job began ({SCOPE}=before-job)")
        assert summary.metrics["uploads.pending.remaining"] == 1
        assert visible_files(real, real.strip(url)) == {"a.txt": b"a"}
    else:
        committer.abort_job(job)
        assert visible_files(real, real.strip(url)) == {}
    assert pending_ids(real, url) == {other}
    real.multipart().abort(f"{real.strip(url)}/other-tool/x.bin", other)
    assert leftovers(real, real.strip(url)) == []


def test_scope_before_job_aborts_no_other_upload_when_the_jobs_start_is_unknown(config, s3_root):
    """The job's start cannot be read: its marker's HEAD fails during job commit, or the job
    has ended (a sweep after it). Unknown means abort no other upload (the failed sweep is
    reported in _SUCCESS); the job's own uncommitted upload is aborted all the same."""
    url = f"{s3_root}/unknown-start"
    real = outcommit.open_store(url, config)
    store = FaultInjectingStore(outcommit.open_store(url, config), [])
    times = InitiationTimes(real, store.inner)
    leftover = other_tools_upload(real, f"{real.strip(url)}/crashed/old.bin")
    times.ages[leftover] = timedelta(hours=1)
    committer, job = start(url, config, "magic", store=store, **{SCOPE: "before-job"})
    message = run_task(committer, job, 0, {"a.txt": b"a"})
    stale = run_task(committer, job, 1, {"stale.txt": b"s"})
    store.add(Fault("modified", path_contains="_job.json", times=-1))
    summary = committer.commit_job(job, [message])
    assert summary.diagnostics["uploads.sweep"].startswith("failed: ")
    assert pending_ids(real, url) == {leftover}
    assert stale["commits"][0]["uploadId"] not in pending_ids(real, url)
    with pytest.raises(outcommit.CommitError, match=r"cannot be told .* no other pending upload is aborted"):
        outcommit.create_committer(url, {**config, SCOPE: "before-job"}, "magic").sweep(job)
    assert pending_ids(real, url) == {leftover}
    real.multipart().abort(f"{real.strip(url)}/crashed/old.bin", leftover)


def test_a_misspelled_sweep_scope_fails_before_the_job_starts(config, s3_root):
    with pytest.raises(outcommit.ConfigError,
                       match=rf"{SCOPE}='before' is not one of all, before-job"):
        outcommit.create_committer(f"{s3_root}/bad-scope", {**config, SCOPE: "before"}, "magic")
