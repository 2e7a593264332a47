"""The micro-batch protocol without Spark: tasks and driver calls as the sink makes them.

Each "run" is a StreamingSink with its own run id (``batches.py`` has the tasks and the
oracle); a commit that "dies" is one whose step hook raises (nothing after it runs, as
when the driver is killed there).
"""

from __future__ import annotations

import json
import posixpath
import re
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
from batches import QUERY, ROWS, assert_exactly_once, batch_table, expected_ids, logged_ids, run_batch

import outcommit.streaming as streaming
from outcommit import CorruptFileError, open_store
from outcommit.engine.tasks import WriteSettings, write_attempt
from outcommit.streaming import BatchIdentity, BatchLogError, StreamingSink
from outcommit.testing.conformance import visible_files
from outcommit.testing.faults import Fault, FaultInjectingStore


class Died(BaseException):
    """The driver 'dies' at a step: nothing after it runs (not even except-clauses for Exception)."""


@pytest.fixture(params=["file-v1", "file-manifest", pytest.param("s3-magic", marks=pytest.mark.s3)])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, dict[str, Any], str]:
    store, committer = request.param.split("-")
    if store == "file":
        return f"file://{tmp_path}/out", {}, committer
    s3_config = request.getfixturevalue("s3_config")
    return f"{request.getfixturevalue('s3_root')}/out", dict(s3_config), committer


def sink_for(target: tuple[str, dict[str, Any], str], **kwargs: Any) -> StreamingSink:
    url, config, committer = target
    return StreamingSink(url, config, committer, **kwargs)


def test_batches_commit_once_and_a_replay_adds_nothing(target: Any) -> None:
    url, config, _ = target
    sink = sink_for(target)
    for batch_id in range(3):
        outcome = sink.commit_batch(batch_id, run_batch(sink, "run-a", batch_id))
        assert not outcome.replayed
    # A restarted query replays batch 2 (its checkpoint had not recorded the commit).
    restarted = sink_for(target)
    replay = run_batch(restarted, "run-b", 2)
    assert all(r.skipped for r in replay), "a task of a committed batch wrote data"
    outcome = restarted.commit_batch(2, replay)
    assert outcome.replayed and outcome.entry.job_id is not None and "-rrun-a" in outcome.entry.job_id
    assert_exactly_once(url, config, range(3))


def test_commit_killed_after_publishing_before_the_log_is_rolled_back(target: Any) -> None:
    url, config, _ = target

    def die(step: str, batch_id: int) -> None:
        if (step, batch_id) == ("job-committed", 1):
            raise Died

    first = sink_for(target, on_step=die)
    first.commit_batch(0, run_batch(first, "run-a", 0))
    with pytest.raises(Died):
        first.commit_batch(1, run_batch(first, "run-a", 1))
    store = open_store(url, config)
    published = visible_files(store, store.strip(url))
    assert any("-b1-rrun-a" in p for p in published), "the dead commit published nothing"
    assert streaming.BatchLog(store, store.strip(url)).get(1) is None

    restarted = sink_for(target)
    outcome = restarted.commit_batch(1, run_batch(restarted, "run-b", 1))
    assert outcome.rolled_back == [f"{QUERY}-b1-rrun-a"]
    restarted.commit_batch(2, run_batch(restarted, "run-b", 2))
    assert_exactly_once(url, config, range(3))
    assert not any("-rrun-a" in p for p in visible_files(store, store.strip(url)) if "-b1-" in p)


@pytest.mark.s3
def test_a_rolled_back_batchs_files_go_in_one_batch_delete(s3_root: str, s3_config: dict[str, Any]) -> None:
    """A rollback deleted its files one request after another: 12 files, 12 round trips.
    On a store with batch deletes it is now one request for them all."""
    target = (f"{s3_root}/rollback", dict(s3_config), "magic")

    def die(step: str, batch_id: int) -> None:
        if step == "job-committed":
            raise Died

    first = sink_for(target, on_step=die)
    with pytest.raises(Died):
        first.commit_batch(0, run_batch(first, "run-a", 0, tasks=4,
                                        settings=WriteSettings(max_rows_per_file=5)))
    store = open_store(target[0], target[1])
    assert len(visible_files(store, store.strip(target[0]))) == 12  # 4 tasks x 15 rows / 5 per file

    restarted = sink_for(target)
    before = dict(restarted.store.iostatistics.snapshot()["counters"])
    assert restarted.roll_back_others(0, keep=None) == [f"{QUERY}-b0-rrun-a"]
    after = restarted.store.iostatistics.snapshot()["counters"]
    requests = {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0)}
    # The job's abort and cleanup delete its state (2 batches, 3 single deletes: the job
    # record among them; its "abort" decision stays until the batch is logged); the 12 data
    # files add one batch, where they were 12 deletes.
    assert requests.get("object_bulk_delete_request") == 3, requests
    assert requests.get("object_delete_request") == 3, requests
    assert not visible_files(store, store.strip(target[0]))
    assert streaming.BatchLog(store, store.strip(target[0])).jobs() == []


def test_commit_killed_after_the_log_keeps_the_batch(target: Any) -> None:
    url, config, _ = target

    def die(step: str, batch_id: int) -> None:
        if (step, batch_id) == ("logged", 0):
            raise Died

    first = sink_for(target, on_step=die)
    with pytest.raises(Died):
        first.commit_batch(0, run_batch(first, "run-a", 0))
    restarted = sink_for(target)
    outcome = restarted.commit_batch(0, run_batch(restarted, "run-b", 0))
    assert outcome.replayed and outcome.rolled_back == [f"{QUERY}-b0-rrun-a"]  # its record, cleaned
    restarted.commit_batch(1, run_batch(restarted, "run-b", 1))
    assert_exactly_once(url, config, range(2))


def test_tasks_killed_mid_batch_leave_nothing_after_the_replay(target: Any) -> None:
    url, config, _ = target
    first = sink_for(target)
    first.commit_batch(0, run_batch(first, "run-a", 0))
    # Run a dies while batch 1's tasks write: one task committed (where it may), one half-way.
    identity = BatchIdentity(QUERY, 1, "run-a")
    job = first.begin_task(identity)
    assert job is not None
    write_attempt(first.committer, job.task_attempt(0, 0), batch_table(1).slice(0, 30).to_batches(),
                  WriteSettings(max_rows_per_file=10))
    half = job.task_attempt(1, 0)
    first.committer.setup_task(half)
    fs = first.committer.filesystem(half)
    with fs.open(f"{first.committer.work_path(half)}/part-00001-000-x.parquet", "wb") as f:
        f.write(b"half a file")
    # The killed process never closes its second file: for magic its upload stays pending.
    stream = fs.open(f"{first.committer.work_path(half)}/part-00001-001-x.parquet", "wb")
    stream.write(b"x" * 10)
    stream.flush()

    restarted = sink_for(target)
    restarted.commit_batch(1, run_batch(restarted, "run-b", 1))
    assert_exactly_once(url, config, range(2))


def test_a_compaction_deletes_the_entries_it_covers_at_once(tmp_path: Path) -> None:
    """Every compaction interval, the batch's commit deletes the entries the previous
    compaction covers: at once, not one round trip each."""
    url = f"file://{tmp_path}/out"
    together = threading.Barrier(2, timeout=60)  # breaks if one delete waits for the other

    def log_entry(_op: str, args: tuple[Any, ...]) -> bool:
        path = str(args[0])
        return (posixpath.basename(posixpath.dirname(path)) == "_outcommit_log"
                and re.fullmatch(r"\d+(\.compact)?\.json", posixpath.basename(path)) is not None
                and together.wait() < 0)

    store = FaultInjectingStore(open_store(url), [Fault("delete", times=0, predicate=log_entry)])
    sink = StreamingSink(url, {}, "v1", compact_interval=3, store=store)
    for batch_id in range(6):
        sink.commit_batch(batch_id, run_batch(sink, "run-a", batch_id, tasks=1))
    names = sorted(p.name for p in (tmp_path / "out" / "_outcommit_log").iterdir() if p.is_file())
    assert names == ["2.compact.json", "3.json", "4.json", "5.compact.json", "_query.json"]  # 0, 1 went


def test_compaction_every_interval_and_readers_see_every_batch(tmp_path: Path) -> None:
    url = f"file://{tmp_path}/out"
    sink = StreamingSink(url, {}, "v1", compact_interval=3)
    for batch_id in range(8):
        sink.commit_batch(batch_id, run_batch(sink, "run-a", batch_id, tasks=1))
    names = sorted(p.name for p in (tmp_path / "out" / "_outcommit_log").iterdir() if p.is_file())
    # Compactions at 2 and 5. After the one at 5, what the one at 2 covered went; the one
    # at 2 and the entries after it stay one more interval, for readers that listed before.
    assert names == ["2.compact.json", "3.json", "4.json", "5.compact.json", "6.json", "7.json",
                     "_query.json"]
    compact = json.loads((tmp_path / "out" / "_outcommit_log" / "5.compact.json").read_text())
    assert [b["batchId"] for b in compact["batches"]] == list(range(6))
    assert [e.batch_id for e in streaming.committed_batches(url)] == list(range(8))
    assert logged_ids(url, {}) == expected_ids(range(8))
    # A batch covered only by a compaction is still recognised as committed.
    outcome = sink.commit_batch(1, run_batch(sink, "run-b", 1, tasks=1))
    assert outcome.replayed
    table = streaming.dataset(url).to_table()
    assert sorted(table.column("id").to_pylist()) == sorted(i for ids in expected_ids(range(8)).values()
                                                           for i in ids)
    assert streaming.committed_files(url, through_batch=0) == \
        [f"{url}/{f.path}" for f in streaming.committed_batches(url)[0].files]


def test_another_querys_log_is_refused(tmp_path: Path) -> None:
    url = f"file://{tmp_path}/out"
    sink = StreamingSink(url, {}, "v1")
    sink.commit_batch(0, run_batch(sink, "run-a", 0))
    other = BatchIdentity(str(uuid.uuid4()), 0, "run-z")
    with pytest.raises(BatchLogError, match="one streaming query per destination"):
        sink.begin_task(other)


def test_a_log_entry_pointing_outside_the_destination_is_refused(tmp_path: Path) -> None:
    url = f"file://{tmp_path}/out"
    sink = StreamingSink(url, {}, "v1")
    sink.commit_batch(0, run_batch(sink, "run-a", 0))
    path = tmp_path / "out" / "_outcommit_log" / "0.json"
    entry = json.loads(path.read_text())
    entry["files"][0]["path"] = "../../etc/passwd"
    path.write_text(json.dumps(entry))
    with pytest.raises(CorruptFileError, match="not a relative path inside the destination"):
        streaming.committed_files(url)


def test_a_straggler_of_a_committed_batch_keeps_nothing(tmp_path: Path) -> None:
    """A zombie task of another run writes batch 0 while run a commits it: write, then check."""
    url = f"file://{tmp_path}/out"
    sink = StreamingSink(url, {}, "manifest")
    zombie = BatchIdentity(QUERY, 0, "run-z")
    zombie_job = sink.begin_task(zombie)
    assert zombie_job is not None
    task = zombie_job.task_attempt(0, 0)
    write_attempt(sink.committer, task, batch_table(0).to_batches(), WriteSettings())
    # Run a's commit rolls the zombie's job back (its task commit included)...
    outcome = sink.commit_batch(0, run_batch(sink, "run-a", 0))
    assert outcome.rolled_back == [zombie_job.job_id]
    # ...and the zombie, checking after its write, throws its attempt away.
    assert sink.committed_meanwhile(zombie, zombie_job.job_id)
    sink.committer.abort_task(task)
    assert sink.begin_task(BatchIdentity(QUERY, 0, "run-late")) is None  # a later one writes nothing
    sink.commit_batch(1, run_batch(sink, "run-a", 1))
    assert_exactly_once(url, {}, range(2))


@pytest.mark.parametrize("where", ["file", pytest.param("s3", marks=pytest.mark.s3)])
def test_duckdb_reads_exactly_the_committed_batches(where: str, request: pytest.FixtureRequest,
                                                    tmp_path: Path) -> None:
    """docs/streaming.md's DuckDB recipe, with an interrupted batch's files beside the log's."""
    duckdb = pytest.importorskip("duckdb")

    if where == "file":
        url, config, committer = f"file://{tmp_path}/out", {}, "v1"
    else:
        url, config, committer = (f"{request.getfixturevalue('s3_root')}/out",
                                  dict(request.getfixturevalue("s3_server").config), "magic")

    def die(step: str, batch_id: int) -> None:
        if (step, batch_id) == ("job-committed", 2):
            raise Died

    sink = StreamingSink(url, config, committer, on_step=die)
    for batch_id in range(2):
        sink.commit_batch(batch_id, run_batch(sink, "run-a", batch_id))
    with pytest.raises(Died):
        sink.commit_batch(2, run_batch(sink, "run-a", 2))  # visible in the directory, not logged

    files = streaming.committed_files(url, config)
    con = duckdb.connect()
    store = open_store(url, config)
    if store.scheme != "file":
        con.register_filesystem(store.fs)  # DuckDB reads s3:// through the same fsspec filesystem
    rows = con.execute("select count(*), count(distinct id) from read_parquet(?, hive_partitioning=true)",
                       [files]).fetchone()
    assert rows == (2 * ROWS, 2 * ROWS)
    everything = con.execute("select count(*) from read_parquet(?, hive_partitioning=true)",
                             [[store.url(f.path) for f in store.list_files(store.strip(url))
                               if f.path.endswith(".parquet") and "/_" not in f.path]]).fetchone()
    assert everything == (3 * ROWS,), "the interrupted batch's files are in the directory"


def test_outcommit_read_reads_a_streaming_destination_through_its_log(target: Any) -> None:
    """outcommit.read (the batch jobs' reader) on a streaming destination: no _SUCCESS there,
    and an interrupted batch's files sit beside the committed ones, not hidden."""
    import outcommit.read

    url, config, _ = target

    def die(step: str, batch_id: int) -> None:
        if (step, batch_id) == ("job-committed", 1):
            raise Died

    sink = sink_for(target, on_step=die)
    sink.commit_batch(0, run_batch(sink, "run-a", 0))
    with pytest.raises(Died):
        sink.commit_batch(1, run_batch(sink, "run-a", 1))  # published, never logged
    store = open_store(url, config)
    dest = store.strip(url)
    assert not store.exists(store.join(dest, "_SUCCESS"))
    in_directory = sorted(store.url(store.join(dest, rel)) for rel in visible_files(store, dest))
    logged = streaming.committed_files(url, config)
    assert len(in_directory) > len(logged) > 0, "the interrupted batch published nothing"
    for require_success in (True, False):
        assert outcommit.read.committed_files(url, config, require_success=require_success) == sorted(logged)
    table = outcommit.read.dataset(url, config).to_table()
    assert sorted(table.column("id").to_pylist()) == expected_ids(range(1))[0]
    assert table.num_rows == ROWS


def test_the_streaming_reader_refuses_a_destination_without_a_log(tmp_path: Path) -> None:
    from outcommit import NotCommittedError

    (tmp_path / "batch").mkdir()
    (tmp_path / "batch" / "part-0.parquet").write_bytes(b"x")
    with pytest.raises(NotCommittedError, match=r"no streaming query has written to .*outcommit\.read"):
        streaming.committed_files(f"file://{tmp_path}/batch")
    with pytest.raises(NotCommittedError, match="no streaming query"):
        streaming.dataset(f"file://{tmp_path}/nowhere")


def test_a_logged_file_that_is_gone_is_reported(tmp_path: Path) -> None:
    url = f"file://{tmp_path}/out"
    sink = StreamingSink(url, {}, "v1")
    sink.commit_batch(0, run_batch(sink, "run-a", 0))
    gone = streaming.committed_batches(url)[0].files[0].path
    (tmp_path / "out" / gone).unlink()
    with pytest.raises(CorruptFileError, match=r"names 1 file\(s\) that are gone"):
        streaming.committed_files(url)
    assert len(streaming.committed_files(url, verify=False)) == len(streaming.committed_batches(url)[0].files)


# -- a log create retried after its first response was lost ----------------------------------------

LOG_ENTRY = rf"/{streaming.LOG_DIR}/\d+(\.compact)?\.json$"


def lose_log_create_responses(sink: StreamingSink, monkeypatch: pytest.MonkeyPatch,
                              replace: Any = None, which: str = LOG_ENTRY) -> list[str]:
    """Wrap the sink's real store: the exclusive create of a batch log entry (or of what the
    pattern ``which`` matches) is performed and then answered with FileExistsError, as a
    client (botocore, gcsfs, the Azure SDK) retrying a request whose first response was lost
    gets 412/409. ``replace(path)`` gives other bytes to create instead (a corrupt entry, or
    another writer's that got there first)."""
    store = sink.store
    assert store.has_capability("fs.create.exclusive"), "the log would not use create_exclusive"
    real = store.create_exclusive
    hit: list[str] = []

    def lossy(path: str, data: bytes) -> None:
        is_entry = re.search(which, path) is not None
        real(path, replace(path) if is_entry and replace is not None else data)
        if is_entry:
            hit.append(path)
            raise FileExistsError(path)

    monkeypatch.setattr(store, "create_exclusive", lossy)
    return hit


def test_a_log_create_whose_response_was_lost_keeps_the_batch(target: Any,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The retried create sees its own entry: success, not 'someone else', and nothing deleted."""
    url, config, _ = target
    sink = sink_for(target, compact_interval=2)  # batch 1 is a compaction: both entry kinds
    hit = lose_log_create_responses(sink, monkeypatch)
    for batch_id in range(3):
        outcome = sink.commit_batch(batch_id, run_batch(sink, "run-a", batch_id))
        assert not outcome.replayed
    assert [p.rsplit("/", 1)[1] for p in hit] == ["0.json", "1.compact.json", "2.json"]
    assert_exactly_once(url, config, range(3))
    restarted = sink_for(target, compact_interval=2)
    assert restarted.commit_batch(2, run_batch(restarted, "run-b", 2)).replayed
    assert_exactly_once(url, config, range(3))


def test_an_unreadable_entry_after_a_lost_create_response_deletes_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"file://{tmp_path}/out"
    sink = StreamingSink(url, {}, "manifest")
    lose_log_create_responses(sink, monkeypatch, replace=lambda _path: b"{ torn")
    with pytest.raises(CorruptFileError, match=r"_outcommit_log/0\.json.*not valid JSON"):
        sink.commit_batch(0, run_batch(sink, "run-a", 0))
    store = open_store(url, {})
    dest = store.strip(url)
    published = visible_files(store, dest)
    (record,) = streaming.BatchLog(store, dest).jobs()
    assert record.files and sorted(f.path for f in record.files) == sorted(published)


def test_another_jobs_entry_after_a_lost_create_response_rolls_ours_back(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another writer's entry got there first: that one stands and ours goes."""
    url = f"file://{tmp_path}/out"
    sink = StreamingSink(url, {}, "manifest")

    def theirs(_path: str) -> bytes:
        entry = streaming.BatchEntry(0, QUERY, f"{QUERY}-b0-rother", "manifest", (), 0.0)
        return json.dumps(entry.to_dict()).encode()

    lose_log_create_responses(sink, monkeypatch, replace=theirs)
    with pytest.raises(streaming.BatchAlreadyCommitted, match="by someone else"):
        sink.commit_batch(0, run_batch(sink, "run-a", 0))
    store = open_store(url, {})
    assert not visible_files(store, store.strip(url)), "our rolled back files stayed"
    assert streaming.BatchLog(store, store.strip(url)).jobs() == []


# -- job records are evidence, not orders -------------------------------------------------------------

def test_a_tampered_job_record_deletes_only_what_its_job_wrote(tmp_path: Path) -> None:
    url = f"file://{tmp_path}/out"
    dest = tmp_path / "out"
    sink = StreamingSink(url, {}, "manifest")
    sink.commit_batch(0, run_batch(sink, "run-a", 0))
    committed = streaming.committed_batches(url)[0].files[0].path
    (dest / "other").mkdir()
    (dest / "other" / "data.parquet").write_bytes(b"not ours")
    (dest / "other" / "part-00000-000-zombie-a0.parquet").write_bytes(b"the zombie's")
    (dest / "_outcommit_log" / "_jobs").mkdir(exist_ok=True)
    named = [committed, "_outcommit_log/0.json", "other/data.parquet",
             "other/part-00000-000-zombie-a0.parquet"]
    (dest / "_outcommit_log" / "_jobs" / "zombie.json").write_text(json.dumps(
        {"format": "outcommit.streaming.Job/1", "jobId": "zombie", "batchId": 0,
         "files": [{"path": p, "size": 1, "rows": 1} for p in named]}))
    outcome = sink.commit_batch(1, run_batch(sink, "run-a", 1))
    assert outcome.rolled_back == ["zombie"]
    assert (dest / committed).exists(), "a committed batch's file was deleted"
    assert (dest / "_outcommit_log" / "0.json").exists(), "a log entry was deleted"
    assert (dest / "other" / "data.parquet").exists(), "a file the job did not write was deleted"
    assert not (dest / "other" / "part-00000-000-zombie-a0.parquet").exists()
    assert logged_ids(url, {}) == expected_ids(range(2))


@pytest.mark.parametrize(("record", "name", "field"), [
    ({"batchId": 2}, "bad", "jobId"),
    ({"jobId": "../../x", "batchId": 2}, "bad", "jobId"),
    ({"jobId": "bad", "batchId": "2"}, "bad", "batchId"),
    ({"jobId": "bad", "batchId": 2, "files": "part-0.parquet"}, "bad", "files"),
    ({"jobId": "bad", "batchId": 2, "runId": 7}, "bad", "runId"),
    ({"jobId": "someone-else", "batchId": 2}, "bad", "jobId"),
    ({"jobId": "bad", "batchId": 0, "files": [{"path": "../outside.parquet", "size": 1, "rows": 1}]},
     "bad", "files.path"),
])
def test_a_corrupt_job_record_is_reported_not_acted_on(tmp_path: Path, record: dict[str, Any],
                                                       name: str, field: str) -> None:
    url = f"file://{tmp_path}/out"
    sink = StreamingSink(url, {}, "manifest")
    sink.commit_batch(0, run_batch(sink, "run-a", 0))
    jobs = tmp_path / "out" / "_outcommit_log" / "_jobs"
    jobs.mkdir(exist_ok=True)
    (jobs / f"{name}.json").write_text(json.dumps({"format": "outcommit.streaming.Job/1", **record}))
    with pytest.raises(CorruptFileError, match=rf"_jobs/{name}\.json: field '{field}'"):
        sink.commit_batch(1, run_batch(sink, "run-a", 1))
    assert logged_ids(url, {}) == expected_ids(range(1))


@pytest.mark.parametrize(("key", "value"), [
    ("metrics", [1]), ("committedAt", "yesterday"), ("jobId", 7), ("queryId", {"q": 1}),
    ("batchId", True)])
def test_a_corrupt_log_entry_field_is_reported(tmp_path: Path, key: str, value: Any) -> None:
    url = f"file://{tmp_path}/out"
    sink = StreamingSink(url, {}, "v1")
    sink.commit_batch(0, run_batch(sink, "run-a", 0))
    path = tmp_path / "out" / "_outcommit_log" / "0.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), key: value}))
    with pytest.raises(CorruptFileError, match=rf"0\.json: field '{key}'"):
        streaming.committed_batches(url)
