"""S3-specific behaviour of magic, directory and partitioned on the moto server."""

from __future__ import annotations

import json
import posixpath

import pytest
from s3_helpers import outcome, run_task, start

import outcommit
from outcommit import CorruptFileError, load_success
from outcommit.cli import main as cli_main
from outcommit.errors import CommitError, DestinationExistsError
from outcommit.testing.conformance import leftovers, visible_files

pytestmark = pytest.mark.s3

MiB = 1024 * 1024
COMMITTERS = ["magic", "directory", "partitioned"]


def write(committer, task, files):
    fs, base = committer.filesystem(task), committer.work_path(task)
    for rel, data in files.items():
        with fs.open(posixpath.join(base, rel), "wb") as f:
            f.write(data)


@pytest.fixture
def config(s3_config):
    return {**s3_config, "outcommit.committer.unique-filenames": "false"}


@pytest.mark.parametrize("name", COMMITTERS)
def test_nothing_exists_before_job_commit_and_nothing_pends_after(name, config, s3_root):
    url = f"{s3_root}/table"
    committer, job = start(url, config, name)
    store = outcommit.open_store(url, config)
    dest = store.strip(url)
    messages = [run_task(committer, job, i, {f"p={i}/f.bin": bytes([i]) * 1000}) for i in range(3)]
    for i in range(3):
        assert store.info(f"{dest}/p={i}/f.bin") is None  # HEAD 404 while the upload is pending
    assert len(store.multipart().list_pending(dest)) == 3
    committer.commit_job(job, messages)
    assert visible_files(store, dest) == {f"p={i}/f.bin": bytes([i]) * 1000 for i in range(3)}
    assert leftovers(store, dest) == []
    assert [f.name for f in store.list_dir(dest) if f.name.startswith("__")] == []


@pytest.mark.parametrize("name", COMMITTERS)
def test_multi_part_files_and_empty_files(name, config, s3_root):
    url = f"{s3_root}/big"
    committer, job = start(url, config, name, **{"outcommit.s3.multipart.part-size": str(5 * MiB)})
    big = bytes(range(256)) * (12 * MiB // 256) + b"tail"
    empty_task = job.task_attempt(1)
    committer.setup_task(empty_task)
    assert not committer.needs_task_commit(empty_task)
    messages = [run_task(committer, job, 0, {"big.bin": big, "empty.bin": b""}),
                committer.commit_task(empty_task)]
    parts = {c["destinationKey"].rsplit("/", 1)[1]: len(c["etags"]) for c in messages[0]["commits"]}
    assert parts == {"big.bin": 3, "empty.bin": 1}
    committer.commit_job(job, messages)
    store = outcommit.open_store(url, config)
    assert visible_files(store, store.strip(url)) == {"big.bin": big, "empty.bin": b""}
    assert leftovers(store, store.strip(url)) == []


def test_magic_writes_parquet_and_pandas_through_its_filesystem(config, s3_root):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    pd = pytest.importorskip("pandas")
    url = f"{s3_root}/pq"
    committer, job = start(url, config, "magic")
    task = job.task_attempt(0)
    committer.setup_task(task)
    fs, base = committer.filesystem(task), committer.work_path(task)
    table = pa.table({"a": list(range(1000)), "b": [str(i) for i in range(1000)]})
    pq.write_table(table, f"{base}/year=2024/part-0.parquet", filesystem=fs)
    with fs.open(f"{base}/frame.csv", "w") as f:
        pd.DataFrame({"x": [1, 2]}).to_csv(f, index=False)
    committer.commit_job(job, [committer.commit_task(task)])
    store = outcommit.open_store(url, config)
    assert pq.read_table(f"{store.strip(url)}/year=2024/part-0.parquet", filesystem=store.fs).equals(table)
    assert store.read_bytes(f"{store.strip(url)}/frame.csv") == b"x\n1\n2\n"


def test_magic_pending_file_uses_hadoop_fields(config, s3_root):
    url = f"{s3_root}/fields"
    committer, job = start(url, {**config, "outcommit.magic.track-commits-in-memory": "false"}, "magic")
    task = job.task_attempt(0)
    committer.setup_task(task)
    write(committer, task, {"d/a.txt": b"abc"})
    store = committer.store
    magic_path = f"{committer.work_path(task)}/d/a.txt"
    pending = store.load_json(magic_path + ".pending")
    for key in ("uri", "bucket", "destinationKey", "uploadId", "etags", "length", "jobId", "taskId"):
        assert key in pending
    assert pending["destinationKey"].endswith("/fields/d/a.txt") and pending["length"] == 3
    assert store.info(magic_path).size == 0  # the zero-byte marker
    committer.abort_job(job)


def test_staging_unique_filenames_by_default(s3_config, s3_root):
    url = f"{s3_root}/uniq"
    committer, job = start(url, s3_config, "directory")
    committer.commit_job(job, [run_task(committer, job, 0, {"part-0.snappy.parquet": b"x"})])
    store = outcommit.open_store(url, s3_config)
    assert list(visible_files(store, store.strip(url))) == [f"part-0-{job.job_id}.snappy.parquet"]


@pytest.mark.parametrize("name", ["directory", "partitioned"])
def test_staging_names_already_unique_keep_one_job_id(name, s3_config, s3_root):
    """The data source's names carry the job id already: it is not added twice."""
    url = f"{s3_root}/uniq2"
    committer, job = start(url, s3_config, name)
    written = f"part-00001-000-{job.job_id}-a0.parquet"
    committer.commit_job(job, [run_task(committer, job, 0, {f"d=1/{written}": b"x"})])
    store = outcommit.open_store(url, s3_config)
    assert list(visible_files(store, store.strip(url))) == [f"d=1/{written}"]


# -- attempts ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["magic", "directory"])
def test_stale_attempt_finishing_late_does_not_change_discovery(name, config, s3_root):
    url = f"{s3_root}/stale"
    committer, job = start(url, config, name)
    run_task(committer, job, 0, {"a.txt": b"first"}, attempt=0)
    run_task(committer, job, 0, {"a.txt": b"late", "late-only.txt": b"x"}, attempt=1)
    committer.commit_job(job)  # discovery: the first attempt to commit holds the task
    store = outcommit.open_store(url, config)
    assert visible_files(store, store.strip(url)) == {"a.txt": b"first"}
    assert leftovers(store, store.strip(url)) == []


@pytest.mark.parametrize("name", ["magic", "partitioned"])
def test_driver_allowed_retry_after_failed_commit_hadoop_17258(name, config, s3_root):
    url = f"{s3_root}/retry"
    committer, job = start(url, config, name)
    run_task(committer, job, 0, {"a.txt": b"attempt 0"}, attempt=0)  # then its process dies
    retry = job.task_attempt(0, 1)
    committer.allow_task_commit(retry)  # the driver gives the task to attempt 1
    committer.setup_task(retry)
    write(committer, retry, {"a.txt": b"attempt 1"})
    committer.commit_task(retry)  # succeeds although attempt 0's pendingset exists
    committer.commit_job(job)
    store = outcommit.open_store(url, config)
    assert visible_files(store, store.strip(url)) == {"a.txt": b"attempt 1"}
    assert leftovers(store, store.strip(url)) == []


def test_large_task_message_is_a_checked_reference(config, s3_root):
    url = f"{s3_root}/ref"
    committer, job = start(url, config, "magic", **{"outcommit.s3.message.inline-commits": "1"})
    message = run_task(committer, job, 0, {"a.txt": b"a", "b.txt": b"b"})
    assert "commits" not in message and message["files"] == 2
    json.dumps(message)
    # Someone rewrites the published pendingset after task commit: the digest catches it.
    path = committer.store.strip(message["pendingset"])
    data = committer.store.load_json(path)
    data["commits"] = data["commits"][:1]
    committer.store.write_bytes(path, json.dumps(data).encode())
    with pytest.raises(CorruptFileError, match="sha256"):
        committer.commit_job(job, [message])
    committer.abort_job(job)
    store = outcommit.open_store(url, config)
    assert visible_files(store, store.strip(url)) == {} and leftovers(store, store.strip(url)) == []


# -- corrupt and tampered files ------------------------------------------------------------------------
def _published(committer, job):
    root = committer.layout(job).pendingsets_dir(job)
    return [f.path for f in committer.meta.list_files(root) if f.path.endswith(".pendingset")]


@pytest.mark.parametrize("name", ["magic", "directory"])
def test_corrupt_pendingset_fails_commit_naming_file_and_field(name, config, s3_root):
    url = f"{s3_root}/corrupt"
    committer, job = start(url, config, name)
    run_task(committer, job, 0, {"a.txt": b"a"})
    run_task(committer, job, 1, {"b.txt": b"b"})
    victim = _published(committer, job)[0]
    data = committer.meta.load_json(victim)
    data["commits"][0]["etags"] = []
    committer.meta.write_bytes(victim, json.dumps(data).encode())
    with pytest.raises(CorruptFileError) as failure:
        committer.commit_job(job)
    assert failure.value.field == "commits[0].etags" and victim.rsplit("/", 1)[1] in str(failure.value)
    store = outcommit.open_store(url, config)
    assert visible_files(store, store.strip(url)) == {}
    committer.abort_job(job)
    assert leftovers(store, store.strip(url)) == []


def test_unparseable_pendingset_and_abort_still_aborts_everything(config, s3_root):
    url = f"{s3_root}/garbage"
    committer, job = start(url, config, "magic", **{"outcommit.s3.abort-pending-uploads": "false"})
    run_task(committer, job, 0, {"a.txt": b"a"})
    run_task(committer, job, 1, {"b.txt": b"b"})
    victim = _published(committer, job)[0]
    committer.meta.write_bytes(victim, b"{not json")
    with pytest.raises(CorruptFileError):
        committer.commit_job(job)
    committer.abort_job(job)
    store = outcommit.open_store(url, config)
    # The unreadable file's upload is left (nothing identifies it) but the readable one is aborted.
    assert len(store.multipart().list_pending(store.strip(url))) == 1
    assert outcommit.create_committer(url, config, "magic").sweep(job).aborted == 1


@pytest.mark.parametrize("field,value,problem", [
    ("destinationKey", "../elsewhere/x.txt", "outside"),
    ("bucket", "another-bucket", "bucket"),
    ("destinationKey", "__magic_job-x/evil", "own area"),
])
def test_tampered_destination_is_refused(field, value, problem, config, s3_root):
    url = f"{s3_root}/tamper"
    committer, job = start(url, config, "magic")
    message = run_task(committer, job, 0, {"a.txt": b"a"})
    commit = message["commits"][0]
    if field == "destinationKey":
        prefix = commit["destinationKey"].rsplit("/", 1)[0]
        value = posixpath.normpath(f"{prefix}/{value}") if value.startswith("..") else f"{prefix}/{value}"
    tampered = {**message, "commits": [{**commit, field: value, "uri": ""}]}
    with pytest.raises(CorruptFileError, match=problem) as failure:
        committer.commit_job(job, [tampered])
    assert failure.value.field == f"commits[0].{field}"
    store = outcommit.open_store(s3_root, config)
    assert [f.path for f in store.list_files(store.strip(s3_root)) if "elsewhere" in f.path] == []
    committer.abort_job(job)
    assert leftovers(store, store.strip(url)) == []


def test_duplicate_destinations_are_refused(config, s3_root):
    url = f"{s3_root}/dup"
    committer, job = start(url, config, "magic")
    first = run_task(committer, job, 0, {"same.txt": b"0"})
    second = run_task(committer, job, 1, {"same.txt": b"1"})
    with pytest.raises(CorruptFileError, match="two uploads"):
        committer.commit_job(job, [first, second])
    committer.abort_job(job)


# -- conflict modes ---------------------------------------------------------------------------------------
def _seed(store, url, files):
    for rel, data in files.items():
        store.write_bytes(f"{store.strip(url)}/{rel}", data)


@pytest.mark.parametrize("name", ["directory", "magic"])
def test_directory_conflict_modes(name, config, s3_root):
    url = f"{s3_root}/modes"
    store = outcommit.open_store(url, config)
    _seed(store, url, {"old.txt": b"old", "p=1/old.txt": b"old"})
    mode = {"outcommit.committer.conflict-mode": "fail"}
    with pytest.raises(DestinationExistsError):
        start(url, config, name, **mode)
    committer, job = start(url, config, name, **{"outcommit.committer.conflict-mode": "append"})
    committer.commit_job(job, [run_task(committer, job, 0, {"new.txt": b"n"})])
    assert set(visible_files(store, store.strip(url))) == {"old.txt", "p=1/old.txt", "new.txt"}
    committer, job = start(url, config, name, **{"outcommit.committer.conflict-mode": "replace"})
    committer.commit_job(job, [run_task(committer, job, 0, {"newer.txt": b"n"})])
    assert visible_files(store, store.strip(url)) == {"newer.txt": b"n"}


def test_partitioned_replace_and_fail_touch_only_written_partitions(config, s3_root):
    url = f"{s3_root}/parts"
    store = outcommit.open_store(url, config)
    _seed(store, url, {"p=1/old.txt": b"1", "p=2/old.txt": b"2", "p=2/sub/deep.txt": b"d",
                       "top.txt": b"t"})
    committer, job = start(url, config, "partitioned", **{"outcommit.committer.conflict-mode": "fail"})
    message = run_task(committer, job, 0, {"p=3/new.txt": b"3"})
    committer.commit_job(job, [message])  # p=3 is new: no conflict
    committer, job = start(url, config, "partitioned", **{"outcommit.committer.conflict-mode": "fail"})
    # The task wrote into p=1, which holds data: its commit fails before uploading anything.
    with pytest.raises(DestinationExistsError, match="p=1"):
        run_task(committer, job, 0, {"p=1/new.txt": b"x"})
    assert store.multipart().list_pending(store.strip(url)) == []
    # A partition that gets data after its task committed is caught at job commit.
    message = run_task(committer, job, 1, {"p=4/new.txt": b"x"})
    _seed(store, url, {"p=4/raced.txt": b"r"})
    with pytest.raises(CommitError, match="p=4") as failure:
        committer.commit_job(job, [message])
    assert isinstance(failure.value.__cause__, DestinationExistsError)
    committer.abort_job(job)
    store.delete(f"{store.strip(url)}/p=4", recursive=True)
    committer, job = start(url, config, "partitioned", **{"outcommit.committer.conflict-mode": "replace"})
    committer.commit_job(job, [run_task(committer, job, 0, {"p=2/new.txt": b"new"})])
    assert visible_files(store, store.strip(url)) == {
        "p=1/old.txt": b"1", "p=2/new.txt": b"new", "p=3/new.txt": b"3", "top.txt": b"t"}
    assert leftovers(store, store.strip(url)) == []


# -- CLI ----------------------------------------------------------------------------------------------------
def test_uploads_cli_lists_checks_and_aborts(config, s3_root, capsys):
    url = f"{s3_root}/cli"
    committer, job = start(url, config, "magic")
    run_task(committer, job, 0, {"a.txt": b"a", "b.txt": b"b"})
    store = outcommit.open_store(url, config)
    adjacent = store.multipart().initiate(f"{store.strip(url)}0/x.txt")
    conf = [arg for k, v in config.items() for arg in ("--conf", f"{k}={v}")]
    assert cli_main(["uploads", "list", url, *conf]) == 0
    listed = capsys.readouterr().out
    assert listed.count("\n") == 2 and "a.txt" in listed and "cli0" not in listed
    assert cli_main(["uploads", "check", url, *conf]) == 1
    # moto dates every upload 2010-11-10: an age of 100 000 days (274 years) spares them,
    # in what list shows and check counts too (they ignored --older-than: a cron job's
    # 'check --older-than 24h' alerted on uploads of running jobs).
    capsys.readouterr()
    assert cli_main(["uploads", "list", url, "--older-than", "100000d", *conf]) == 0
    assert capsys.readouterr().out == ""
    assert cli_main(["uploads", "check", url, "--older-than", "100000d", *conf]) == 0
    assert cli_main(["uploads", "check", url, "--older-than", "1d", *conf]) == 1
    assert cli_main(["uploads", "abort", url, "--older-than", "100000d", "--force", *conf]) == 0
    assert len(store.multipart().list_pending(store.strip(url))) == 2
    assert cli_main(["uploads", "abort", url, *conf]) == 1  # without --force: only shows
    assert cli_main(["uploads", "abort", url, "--force", *conf]) == 0
    assert cli_main(["uploads", "check", url, *conf]) == 0
    assert [u.upload_id for u in store.multipart().list_pending(store.strip(url) + "0")] == [adjacent]
    store.multipart().abort(f"{store.strip(url)}0/x.txt", adjacent)
    committer.cleanup_job(job)
    with pytest.raises(CommitError):
        committer.commit_job(job)


def test_success_iostatistics_count_this_jobs_s3_requests(config, s3_root):
    url = f"{s3_root}/iostats"
    committer, job = start(url, config, "magic")
    messages = [run_task(committer, job, i, {f"f{i}-{n}.txt": b"x" for n in range(3)}) for i in range(2)]
    summary = committer.commit_job(job, messages)
    counters = summary.iostatistics["counters"]
    assert counters["multipart_upload_completed"] == 6          # one per file
    assert counters["committer_commits_completed"] == 6
    assert counters["committer_tasks_completed"] == 2
    assert counters["object_put_request"] == 1                   # _commit-started.json (not _SUCCESS itself)
    assert "object_multipart_initiated" not in counters          # the tasks' requests, not the job's
    store = outcommit.open_store(url, config)
    assert load_success(store, f"{store.strip(url)}/_SUCCESS").iostatistics["counters"] == counters


@pytest.mark.parametrize("name", COMMITTERS)
def test_a_refused_job_commit_leaves_no_commit_record(name, config, s3_root):
    """Job commit creates its record beside the job check (one round trip). A call the
    check refuses (the job was aborted) deletes the record it created: a record left
    behind would tell a later call that a commit began, to be resumed."""
    url = f"{s3_root}/refused"
    committer, job = start(url, config, name)
    messages = [run_task(committer, job, 0, {"a.bin": b"a"})]
    committer.abort_job(job)
    committer.cleanup_job(job)
    store = outcommit.open_store(url, config)
    dest = store.strip(url)
    assert leftovers(store, dest) == []
    with pytest.raises(outcommit.JobCommitError, match="not active"):
        outcommit.create_committer(url, config, name).commit_job(job, messages)
    assert leftovers(store, dest) == [] and visible_files(store, dest) == {}
    assert [f.name for f in store.list_dir(dest) if f.name.startswith("__")] == []


def _aborted_job(url, config):
    """A magic job with one committed task, aborted and cleaned up: nothing of it is left."""
    committer, job = start(url, config, "magic")
    run_task(committer, job, 0, {"a.bin": b"a"})
    committer.abort_job(job)
    committer.cleanup_job(job)
    return job, outcommit.open_store(url, config)


def test_a_commit_record_whose_create_response_was_lost_is_still_this_calls(config, s3_root):
    """The record's exclusive create took effect and its answer was lost (the retry then
    meets it as existing): the call knows it by its own nonce, so a refused call (the job
    was aborted) still deletes it and never takes it for an earlier commit to resume —
    which, by discovery, would have committed an aborted job with no files."""
    from outcommit.testing.faults import Fault, FaultInjectingStore

    url = f"{s3_root}/lost-record"
    job, store = _aborted_job(url, config)
    lossy = FaultInjectingStore(store, [Fault("create_exclusive", path_contains="_commit-started",
                                              when="after", error=FileExistsError)])
    with pytest.raises(outcommit.JobCommitError, match="not active"):
        outcommit.create_committer(url, config, "magic", store=lossy).commit_job(job)
    assert lossy.faults[0].fired == 1
    dest = store.strip(url)
    assert leftovers(store, dest) == [] and visible_files(store, dest) == {}


def test_an_aborted_job_whose_state_was_kept_is_never_committed(config, s3_root):
    """The abort could not delete what the commit published, so it kept the job's state
    (and its note). A later commit_job must not take that state for an interrupted commit
    to resume: the job was aborted. The next abort removes everything."""
    from outcommit.success import SUCCESS_FILE
    from outcommit.testing.faults import Fault, FaultInjectingStore, failing_deletes_in

    url = f"{s3_root}/aborted-kept"
    store = outcommit.open_store(url, config)
    dest = store.strip(url)
    no_success = FaultInjectingStore(store, [Fault("save_json", path_contains=SUCCESS_FILE, times=-1)])
    committer, job = start(url, config, "magic", store=no_success)
    messages = [run_task(committer, job, 0, {"a.bin": b"a"})]
    with pytest.raises(outcommit.JobCommitError):
        committer.commit_job(job, messages)
    refusing = FaultInjectingStore(store, failing_deletes_in(dest))
    outcommit.create_committer(url, config, "magic", store=refusing).abort_job(job)
    assert visible_files(store, dest) == {"a.bin": b"a"}
    again = outcommit.create_committer(url, config, "magic")
    assert again.recovery.job_status(job.job_id, [0]) == "abort-kept"
    with pytest.raises(outcommit.JobCommitError, match="was aborted"):
        again.commit_job(job, messages)
    assert not store.exists(f"{dest}/{SUCCESS_FILE}")
    again.abort_job(job)
    again.cleanup_job(job)
    assert visible_files(store, dest) == {} and leftovers(store, dest) == []


def test_an_abort_that_cannot_tell_whether_a_commit_began_says_so(config, s3_root, caplog):
    """The store could not answer whether the job's commit began (its credentials were
    refused): the abort logged 'the interrupted job commit ... was not undone' for a job
    that never began to commit. The state stays all the same; the log says what is known."""
    from outcommit.testing.faults import Fault, FaultInjectingStore

    url = f"{s3_root}/cannot-tell"
    store = outcommit.open_store(url, config)
    committer, job = start(url, config, "magic")
    run_task(committer, job, 0, {"a.bin": b"a"})
    blind = FaultInjectingStore(store, [Fault(op, path_contains="_commit-started", times=-1,
                                              error=PermissionError) for op in ("info", "exists")])
    with caplog.at_level("ERROR", logger="outcommit"):
        outcommit.create_committer(url, config, "magic", store=blind).abort_job(job)
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 1 and "could not tell whether a job commit into" in errors[0]
    assert "interrupted job commit" not in errors[0]
    assert committer.recovery.job_status(job.job_id, [0]) == "abort-kept"  # kept for the next abort
    committer.abort_job(job)
    committer.cleanup_job(job)
    assert outcome(url, config) == ({}, [])


def test_jobs_of_a_shared_staging_directory_are_listed_per_destination(s3_config, s3_root, tmp_path):
    """With a staging directory shared by destinations, a destination's 'jobs' are only
    those whose state names it: 'outcommit jobs abort' never reaches another's."""
    shared = {**s3_config, "outcommit.s3.staging.shared-dir": f"file://{tmp_path}/shared"}
    a, job_a = start(f"{s3_root}/shared-a", shared, "directory")
    b, job_b = start(f"{s3_root}/shared-b", shared, "directory")
    run_task(b, job_b, 0, {"b.bin": b"b"})
    assert list(a.recovery.state.leftover_jobs()) == [job_a.job_id]
    assert list(b.recovery.state.leftover_jobs()) == [job_b.job_id]
    assert cli_main(["jobs", "abort", f"{s3_root}/shared-a", job_b.job_id, "--committer", "directory",
                     "--force", "--interrupted"]
                    + [arg for k, v in shared.items() for arg in ("--conf", f"{k}={v}")]) == 2
    b.abort_job(job_b)
    b.cleanup_job(job_b)
    a.abort_job(job_a)
    a.cleanup_job(job_a)


def test_a_record_a_refused_call_could_not_delete_never_commits_an_aborted_job(config, s3_root):
    """A refused call (the job was aborted) could not delete the record it created beside
    the check: the record stays alone. A later commit by discovery must not take it for an
    interrupted commit: resuming it would commit no file and write a _SUCCESS."""
    from outcommit.success import SUCCESS_FILE
    from outcommit.testing.faults import Fault, FaultInjectingStore

    url = f"{s3_root}/stray-record"
    job, store = _aborted_job(url, config)
    stuck = FaultInjectingStore(store, [Fault("delete", path_contains="_commit-started", times=-1)])
    with pytest.raises(outcommit.JobCommitError, match="not active"):
        outcommit.create_committer(url, config, "magic", store=stuck).commit_job(job)
    dest = store.strip(url)
    assert leftovers(store, dest), "the stray record should have stayed"
    with pytest.raises(outcommit.JobCommitError, match="no committed task is left"):
        outcommit.create_committer(url, config, "magic").commit_job(job)
    assert not store.exists(f"{dest}/{SUCCESS_FILE}") and visible_files(store, dest) == {}


class _Killed(BaseException):
    """The abort's process dies here: nothing after it runs (not an Exception: no handler
    of the committer's failure paths catches it)."""


def test_an_abort_killed_midway_still_stops_a_later_resume(config, s3_root):
    """The abort dies after ending the job and before aborting its uploads; a refused
    commit_job then cannot delete the record it created beside its check. A later
    commit_job must not take that record and the pendingsets left for an interrupted
    commit to resume: the abort's note, written before the job ended, says the job was
    aborted. Aborting again removes everything."""
    from outcommit.success import SUCCESS_FILE
    from outcommit.testing.faults import Fault, FaultInjectingStore

    url = f"{s3_root}/killed-abort"
    store = outcommit.open_store(url, config)
    dest = store.strip(url)
    committer, job = start(url, config, "magic")
    messages = [run_task(committer, job, 0, {"a.bin": b"a"})]
    dying = FaultInjectingStore(store, [Fault("multipart.abort", error=_Killed)])
    with pytest.raises(_Killed):
        outcommit.create_committer(url, config, "magic", store=dying).abort_job(job)
    stuck = FaultInjectingStore(store, [Fault("delete", path_contains="_commit-started", times=-1)])
    with pytest.raises(outcommit.JobCommitError, match="not active"):
        outcommit.create_committer(url, config, "magic", store=stuck).commit_job(job, messages)
    again = outcommit.create_committer(url, config, "magic")
    assert again.recovery.job_status(job.job_id, [0]) == "abort-kept"
    with pytest.raises(outcommit.JobCommitError, match="was aborted"):
        again.commit_job(job)
    assert not store.exists(f"{dest}/{SUCCESS_FILE}") and visible_files(store, dest) == {}
    again.abort_job(job)
    again.cleanup_job(job)
    assert visible_files(store, dest) == {} and leftovers(store, dest) == []


def test_the_note_of_an_earlier_attempts_killed_abort_does_not_hide_a_later_commit(config, s3_root):
    """Attempt 0's abort died right after ending the job (its note stays). Attempt 1 was
    set up, recovered the task, and its own commit died before _SUCCESS. That commit is
    attempt 1's: the job is 'commit-began', and 'outcommit jobs abort' must not act on it
    without --interrupted, as it may for an aborted attempt."""
    from outcommit.success import SUCCESS_FILE
    from outcommit.testing.faults import Fault, FaultInjectingStore

    url = f"{s3_root}/later-attempt"
    store = outcommit.open_store(url, config)
    dest = store.strip(url)
    committer, job = start(url, config, "magic")
    run_task(committer, job, 0, {"a.bin": b"a"})
    dying = FaultInjectingStore(store, [Fault("delete", path_contains="_job.json", when="after",
                                              error=_Killed)])
    with pytest.raises(_Killed):
        outcommit.create_committer(url, config, "magic", store=dying).abort_job(job)
    again = outcommit.create_committer(url, config, "magic")
    assert again.recovery.job_status(job.job_id, [0]) == "abort-kept"
    later = job.next_attempt()
    again.setup_job(later)
    assert again.recover_task(later.task_attempt(0))
    no_success = FaultInjectingStore(store, [Fault("save_json", path_contains=SUCCESS_FILE, times=-1)])
    with pytest.raises(outcommit.JobCommitError):
        outcommit.create_committer(url, config, "magic", store=no_success).commit_job(later)
    assert visible_files(store, dest) == {"a.bin": b"a"}
    assert again.recovery.job_status(job.job_id, [0, 1]) == "commit-began"
    conf = [arg for k, v in config.items() for arg in ("--conf", f"{k}={v}")]
    assert cli_main(["jobs", "abort", url, job.job_id, "--committer", "magic", "--force", *conf]) != 0
    assert visible_files(store, dest) == {"a.bin": b"a"}
    again.abort_job(later)
    again.cleanup_job(later)
    assert visible_files(store, dest) == {} and leftovers(store, dest) == []


def _interrupted_before_success(config, url):
    """A magic job of two files whose commit completed both uploads and failed at its
    _SUCCESS: (url, store, destination, job, the tasks' messages)."""
    from outcommit.success import SUCCESS_FILE
    from outcommit.testing.faults import Fault, FaultInjectingStore

    store = outcommit.open_store(url, config)
    no_success = FaultInjectingStore(store, [Fault("save_json", path_contains=SUCCESS_FILE, times=-1)])
    committer, job = start(url, config, "magic", store=no_success)
    messages = [run_task(committer, job, i, {f"f{i}.bin": b"x%d" % i}) for i in range(2)]
    with pytest.raises(outcommit.JobCommitError):
        committer.commit_job(job, messages)
    return url, store, store.strip(url), job, messages


def _repeated_completions_succeed(committer) -> None:
    """S3 can answer a repeated completion of an upload with success without making its
    object again: emulated around the real client (moto answers NoSuchUpload)."""
    real_complete = committer.mp.complete

    def repeated_completion_succeeds(path, upload_id, etags, if_none_match=False):
        try:
            return real_complete(path, upload_id, etags, if_none_match)
        except Exception:
            return "answered-as-done"
    committer.mp.complete = repeated_completion_succeeds


def test_a_later_attempt_never_reports_an_object_a_killed_abort_deleted(config, s3_root):
    """An interrupted commit completed both uploads; its abort died after deleting one of
    the two objects. A later attempt recovers the tasks and commits: completing that
    upload again may answer success without making the object again (S3 can answer a
    repeated completion so; emulated here around the real client), so every file is
    checked against its upload's etag before _SUCCESS names it."""
    from outcommit.success import SUCCESS_FILE
    from outcommit.testing.faults import Fault, FaultInjectingStore

    url, store, dest, job, _messages = _interrupted_before_success(config, f"{s3_root}/later-deleted")
    serial = {**config, "outcommit.committer.threads": "1"}
    killer = FaultInjectingStore(store, [Fault("delete", path_contains=".bin", when="after", error=_Killed)])
    with pytest.raises(_Killed):
        outcommit.create_committer(url, serial, "magic", store=killer).abort_job(job)
    assert len(visible_files(store, dest)) == 1
    later = job.next_attempt()
    again = outcommit.create_committer(url, config, "magic")
    again.setup_job(later)
    for index in range(2):
        again.recover_task(later.task_attempt(index))
    _repeated_completions_succeed(again)
    with pytest.raises(outcommit.JobCommitError, match="not in the destination as this job made them"):
        again.commit_job(later)
    assert not store.exists(f"{dest}/{SUCCESS_FILE}")


@pytest.mark.parametrize("how", ["resumed", "later attempt"])
def test_a_resumed_commit_never_reports_an_object_another_jobs_replace_deleted(how, config, s3_root):
    """An interrupted commit completed both uploads (no _SUCCESS); another job, under
    replace, committed into the destination and deleted both objects; the job's commit is
    then resumed, or a later attempt recovers its tasks and commits. No abort began, yet
    completing those uploads again may answer success without making the objects again
    (S3 can; emulated around the real client): every file is checked against its upload's
    etag before _SUCCESS names it (the v1 twin: tests/core/stateful/test_batch_regressions.py)."""

    url, store, dest, job, messages = _interrupted_before_success(config, f"{s3_root}/replaced-meanwhile")
    replacing, other = start(url, {**config, "outcommit.committer.conflict-mode": "replace"}, "magic")
    replacing.commit_job(other, [run_task(replacing, other, 0, {"other.bin": b"other"})])
    assert sorted(visible_files(store, dest)) == ["other.bin"]
    again = outcommit.create_committer(url, config, "magic")
    if how == "later attempt":
        job = job.next_attempt()
        again.setup_job(job)
        for index in range(2):
            again.recover_task(job.task_attempt(index))
        messages = None
    _repeated_completions_succeed(again)
    with pytest.raises(outcommit.JobCommitError, match="not in the destination as this job made them"):
        again.commit_job(job, messages)
    assert sorted(visible_files(store, dest)) == ["other.bin"]
    assert load_success(store, f"{dest}/_SUCCESS").jobId == other.job_id
    again.abort_job(job)
    again.cleanup_job(job)


def test_partitioned_finds_a_partition_under_an_earlier_releases_name(config, s3_root):
    """Partition values are escaped as Spark escapes them since 2026-11-26: an earlier
    release named 'Zürich' city=Z%C3%BCrich and '10:30' t=10:30. A dynamic partition
    overwrite left such a partition beside the new one (readers decode both names to the
    same value: old and new rows), and 'fail' let the write through."""
    import pyarrow as pa

    from outcommit.engine.local import LocalDriver
    from outcommit.read import dataset

    url = f"{s3_root}/renamed"
    store = outcommit.open_store(url, config)
    _seed(store, url, {"city=Z%C3%BCrich/t=10:30/part-old.csv": b"id\n100\n",
                       "city=Bern/t=10:30/part-old.csv": b"id\n200\n"})
    new_rows = pa.table({"id": [1], "city": ["Zürich"], "t": ["10:30"]})

    def run(mode: str) -> None:
        LocalDriver(url, committer="partitioned", fmt="csv", partition_by=["city", "t"],
                    config={**config, "outcommit.committer.conflict-mode": mode}).run([new_rows])

    with pytest.raises(CommitError, match=r"city=Z%C3%BCrich/t=10:30 .* already holds data"):
        run("fail")
    run("replace")
    table = dataset(url, config, format="csv").to_table()
    rows = sorted(zip(table["id"].to_pylist(), table["city"].to_pylist(), table["t"].to_pylist(),
                      strict=True))
    assert rows == [(1, "Zürich", "10:30"), (200, "Bern", "10:30")]
    assert "city=Z%C3%BCrich/t=10:30/part-old.csv" not in visible_files(store, store.strip(url))


@pytest.mark.parametrize("name", COMMITTERS)
def test_conflict_modes_see_a_partition_named_with_a_leading_underscore(name, config, s3_root):
    """_src=a/ is data to Spark and to outcommit.read; the conflict modes took it for
    hidden state (Hadoop's rule), so 'replace' kept its old files and 'fail' let a job in.
    Other jobs' state (__magic_job-..., _temporary) stays hidden."""
    url = f"{s3_root}/underscore-{name}"
    store = outcommit.open_store(url, config)
    _seed(store, url, {"_src=a/old.txt": b"old", "_temporary/other.txt": b"t"})
    with pytest.raises(CommitError, match="_src=a"):  # at setup, task or job commit
        committer, job = start(url, config, name, **{"outcommit.committer.conflict-mode": "fail"})
        try:
            committer.commit_job(job, [run_task(committer, job, 0, {"_src=a/new.txt": b"new"})])
        finally:
            committer.abort_job(job)
    assert store.multipart().list_pending(store.strip(url)) == []
    committer, job = start(url, config, name, **{"outcommit.committer.conflict-mode": "replace"})
    committer.commit_job(job, [run_task(committer, job, 0, {"_src=a/new.txt": b"new"})])
    assert visible_files(store, store.strip(url)) == {"_src=a/new.txt": b"new"}
    assert store.exists(f"{store.strip(url)}/_temporary/other.txt")


def test_hadoops_magic_committer_state_is_foreign(config, s3_root):
    """Issue 27 #8 on S3: Hadoop's S3A magic committer keeps its job's state in
    __magic_job-<uuid>/ as outcommit's magic committer does, with no outcommit marker in it:
    'jobs' lists it as foreign and deletes it only with --foreign (its directory alone: the
    upload its task left pending is Hadoop's, and an abort of another job leaves it, as the
    sweep leaves every upload under a destination holding a live job's directory)."""
    url = f"{s3_root}/hadoop-magic"
    store = outcommit.open_store(url, config)
    dest = store.strip(url)
    hadoop_job = "5d1c8f3e-0a4b-4c2d-9e6f-7a8b9c0d1e2f"
    root = f"{dest}/__magic_job-{hadoop_job}"
    upload = store.multipart().initiate(f"{dest}/part-00000.parquet")
    base = f"{root}/job-{hadoop_job}/tasks/attempt_{hadoop_job}_0000_m_000000_0/__base"
    store.save_json(f"{base}/part-00000.parquet.pending",
                    {"version": 2, "uploadId": upload, "destinationKey": "part-00000.parquet"})
    store.write_bytes(f"{base}/part-00000.parquet", b"")
    ours, job = start(url, config, "magic")  # outcommit's own job beside it
    conf = [arg for k, v in config.items() for arg in ("--conf", f"{k}={v}")]

    statuses = {job_id: ours.recovery.job_status(job_id, attempts)
                for job_id, attempts in ours.recovery.state.leftover_jobs().items()}
    assert statuses == {hadoop_job: "foreign", job.job_id: "live"}
    assert cli_main(["jobs", "abort", url, hadoop_job, "--committer", "magic", "--force",
                     "--interrupted", *conf]) == 2
    assert store.exists(f"{base}/part-00000.parquet.pending")
    ours.abort_job(job)  # its sweep: Hadoop's directory protects Hadoop's upload
    ours.cleanup_job(job)
    assert [u.upload_id for u in store.multipart().list_pending(dest + "/")] == [upload]
    assert cli_main(["jobs", "abort", url, hadoop_job, "--committer", "magic", "--force",
                     "--foreign", *conf]) == 0
    assert not store.exists(root)
    assert [u.upload_id for u in store.multipart().list_pending(dest + "/")] == [upload]
    store.multipart().abort(f"{dest}/part-00000.parquet", upload)


def test_a_magic_job_whose_cleanup_died_after_its_markers_is_still_ours(config, s3_root):
    """Its markers went, its claims and pendingsets stayed (files only outcommit writes):
    not foreign, and its abort needs no --foreign."""
    from outcommit.testing.faults import Fault, FaultInjectingStore

    url = f"{s3_root}/markerless"
    store = outcommit.open_store(url, config)
    committer, job = start(url, config, "magic")
    run_task(committer, job, 0, {"a.bin": b"a"})
    stuck = FaultInjectingStore(store, [Fault("delete", times=-1, predicate=lambda _op, args:
                                              not str(args[0]).endswith("_job.json"))])
    outcommit.create_committer(url, config, "magic", store=stuck).cleanup_job(job)  # never raises
    again = outcommit.create_committer(url, config, "magic")
    attempts = again.recovery.state.leftover_jobs()[job.job_id]
    assert again.recovery.job_status(job.job_id, attempts) == "not-committed"
    conf = [arg for k, v in config.items() for arg in ("--conf", f"{k}={v}")]
    assert cli_main(["jobs", "abort", url, job.job_id, "--committer", "magic", "--force", *conf]) == 0
    assert outcome(url, config) == ({}, [])


@pytest.mark.parametrize("name", ["magic", "directory", "partitioned"])
def test_a_store_without_exclusive_create_is_refused_by_the_delayed_committers(name, s3_config, s3_root):
    """They publish pendingsets, claims and the commit record with create_exclusive: a
    store that cannot create exclusively is refused before any job, naming it."""
    from outcommit import capabilities as caps
    from outcommit.errors import UnsafeCommitterError

    store = outcommit.open_store(s3_root, s3_config)
    store.capabilities = store.capabilities.without(caps.CREATE_EXCLUSIVE)
    with pytest.raises(UnsafeCommitterError, match=r"fs\.create\.exclusive \(exclusive create\)"):
        outcommit.create_committer(s3_root, s3_config, name, store=store)


def test_core_memmp_magic_is_neither_offered_nor_accepted_on_s3(s3_root: str,
                                                                s3_config: dict[str, str]) -> None:
    """S3's store has every capability memmp-magic requires, but memmp-magic's uploads live
    in this process (made for memmp://): the refusals listed it as safe for s3:// before."""
    from outcommit.errors import UnsafeCommitterError
    from outcommit.factory import describe_capabilities

    url = f"{s3_root}/made-for"
    assert "memmp-magic" not in describe_capabilities(url, s3_config)["safe_committers"]
    with pytest.raises(UnsafeCommitterError, match=r"made for memmp:// only, not s3://") as caught:
        outcommit.create_committer(url, s3_config, "memmp-magic")
    assert caught.value.safe == ["directory", "magic", "partitioned"]


@pytest.mark.parametrize("name", ["magic", "directory", "partitioned"])
def test_s3_committers_are_refused_on_memmp(name: str) -> None:
    """memmp:// has every capability they require, but they bind S3: their pendingsets
    name s3a:// URIs and their uploads are S3's. Asked for there, they are refused in one
    line naming the schemes they are made for, and memmp:// never lists them as safe."""
    from outcommit.errors import UnsafeCommitterError
    from outcommit.factory import describe_capabilities

    with pytest.raises(UnsafeCommitterError, match=rf"committer '{name}' is made for s3://, s3a:// "
                                                   r"only, not memmp://") as caught:
        outcommit.create_committer("memmp:///bucket/made-for", committer=name)
    assert caught.value.safe == ["memmp-magic"]
    assert describe_capabilities("memmp:///bucket/made-for")["safe_committers"] == ["memmp-magic"]
