"""The local engine drives the whole lifecycle; failures are injected at chosen points."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.dataset as ds
import pytest

from outcommit import CommitError, load_success, open_store
from outcommit.engine.local import FailurePoint, LocalDriver
from outcommit.engine.writer import escape_partition_value
from outcommit.testing.conformance import leftovers


def tables(tasks: int = 4, rows: int = 30) -> list[pa.Table]:
    return [pa.table({"id": pa.array(range(t * rows, (t + 1) * rows), pa.int64()),
                      "day": [f"2026-11-0{1 + i % 3}" for i in range(rows)],
                      "v": [float(i) for i in range(rows)]}) for t in range(tasks)]


def read_back(dest: str) -> pa.Table:
    path = open_store(dest).strip(dest)
    return ds.dataset(path, format="parquet", partitioning="hive").to_table()


@pytest.mark.parametrize("mode", ["thread", "process"])
def test_output_is_exactly_the_input_once_despite_a_failed_attempt(tmp_path, mode: str) -> None:
    dest = f"file://{tmp_path}/out"
    driver = LocalDriver(dest, mode=mode, partition_by=["day"], max_rows_per_file=7,
                         failures=[FailurePoint(task=2, attempt=0, point="mid-write", after_files=2)])
    result = driver.run(tables())
    assert result.attempts == {0: 1, 1: 1, 2: 2, 3: 1}
    assert len(result.failures) == 1 and "mid-write" in result.failures[0]
    data = read_back(dest)
    assert sorted(data["id"].to_pylist()) == list(range(120))
    assert sorted({p.name for p in (tmp_path / "out").iterdir()}) == [
        "_SUCCESS", "day=2026-11-01", "day=2026-11-02", "day=2026-11-03"]
    assert "day" not in pa.parquet.read_schema(next((tmp_path / "out" / "day=2026-11-01").iterdir())).names
    store = open_store(dest)
    report = load_success(store, store.strip(dest) + "/_SUCCESS")
    assert report.metrics["rows.written"] == 120 and report.metrics["files.written"] == result.files
    assert leftovers(store, store.strip(dest)) == []


def test_file_names_carry_job_id_and_attempt(tmp_path) -> None:
    dest = f"file://{tmp_path}/out"
    result = LocalDriver(dest, failures=[FailurePoint(task=0, point="before-commit")]).run(tables(1))
    names = [p.name for p in (tmp_path / "out").iterdir() if p.suffix == ".parquet"]
    job_id = result.summary.jobId
    assert names == [f"part-00000-000-{job_id}-a1.parquet"]


def test_lost_commit_message_is_retried_when_task_commit_is_repeatable(tmp_path) -> None:
    dest = f"file://{tmp_path}/out"
    result = LocalDriver(dest, committer="v1",
                         failures=[FailurePoint(task=1, point="after-commit")]).run(tables(2))
    assert result.attempts[1] == 2
    assert sorted(read_back(dest)["id"].to_pylist()) == list(range(60))


def test_lost_commit_message_fails_the_job_when_task_commit_is_not_repeatable(tmp_path) -> None:
    dest = f"file://{tmp_path}/out"
    driver = LocalDriver(dest, committer="v2", failures=[FailurePoint(task=1, point="after-commit")])
    with pytest.raises(CommitError, match="v2 task commit is not repeatable: failing the job"):
        driver.run(tables(2))
    store = open_store(dest)
    assert not (tmp_path / "out" / "_SUCCESS").exists()
    assert leftovers(store, store.strip(dest)) == []


def test_a_job_that_fails_after_some_tasks_committed_leaves_nothing(tmp_path) -> None:
    dest = f"file://{tmp_path}/out"
    driver = LocalDriver(dest, max_attempts=2,
                         failures=[FailurePoint(task=3, attempt=0, point="before-commit", crash=True),
                                   FailurePoint(task=3, attempt=1, point="mid-write", after_files=0)])
    with pytest.raises(CommitError, match="task 3 failed 2 times"):
        driver.run(tables())
    assert list((tmp_path / "out").iterdir()) == []


def test_unknown_committer_fails_before_any_task_runs(tmp_path) -> None:
    from outcommit import UnknownCommitterError

    with pytest.raises(UnknownCommitterError):
        LocalDriver(f"file://{tmp_path}/out", committer="nope")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("dest", "options", "message"), [
    ("file://{tmp}/out", {"mode": "fork"}, "use 'thread' or 'process'"),
    ("file://{tmp}/out", {"workers": 0}, "workers >= 1"),
    ("memory://{tmp}/out", {"mode": "process"}, "use mode='thread'"),
])
def test_a_bad_driver_setting_fails_before_any_task_runs(tmp_path, dest, options, message) -> None:
    """mode='fork' ran as 'process'; a memory:// job in processes failed each task twice
    with 'job ... is not active' (its store was not the driver's)."""
    from outcommit import ConfigError

    url = dest.format(tmp=tmp_path)
    with pytest.raises(ConfigError, match=message):
        LocalDriver(url, **options).run(tables(2))
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("fmt, reader", [("csv", "csv"), ("json", "json")])
def test_csv_and_json_formats(tmp_path, fmt: str, reader: str) -> None:
    dest = f"file://{tmp_path}/out"
    LocalDriver(dest, fmt=fmt).run(tables(2, rows=5))
    files = sorted(p for p in (tmp_path / "out").iterdir() if p.suffix == f".{fmt}")
    assert len(files) == 2
    data = ds.dataset([str(f) for f in files], format=reader).to_table()
    assert sorted(data["id"].to_pylist()) == list(range(10))


def test_partition_values_cannot_escape_their_directory() -> None:
    assert escape_partition_value("..") == "%2E%2E"
    assert "/" not in escape_partition_value("a/../../etc")
    assert escape_partition_value(None) == "__HIVE_DEFAULT_PARTITION__"
    assert escape_partition_value("a=b") == "a%3Db"
    # As Spark escapes (it reads each %XX back as one character): not UTF-8 bytes.
    assert escape_partition_value("Zürich/東京") == "Zürich%2F東京"
    assert escape_partition_value("t:1 50%\x00") == "t%3A1 50%25%00"
    # Values as Spark casts them to strings (booleans, Java's doubles).
    assert [escape_partition_value(v) for v in (True, float("nan"), 1e10, 0.0001, 2.5)] == \
        ["true", "NaN", "1.0E10", "1.0E-4", "2.5"]


def test_a_committing_task_leaves_its_write_slot_to_the_next_task(tmp_path, monkeypatch) -> None:
    """With one writer, the first task to commit waits until another task starts writing:
    only possible when a commit (its round trips) does not hold the write slot."""
    import threading

    from outcommit.engine import local

    lock = threading.Lock()
    first_commit, written_meanwhile = threading.Event(), threading.Event()
    writing, most, seen = [0], [0], []
    write_batches = local.StreamingWriter.write_batches

    def counted_write(self, batches):  # type: ignore[no-untyped-def]
        with lock:
            writing[0] += 1
            most[0] = max(most[0], writing[0])
            if first_commit.is_set():  # a write that began while the first commit waits
                written_meanwhile.set()
        try:
            return write_batches(self, batches)
        finally:
            with lock:
                writing[0] -= 1

    create = local.create_committer

    def committer_waiting_for_a_write(*args, **kwargs):  # type: ignore[no-untyped-def]
        committer = create(*args, **kwargs)
        commit_task = committer.commit_task

        def commit(task):  # type: ignore[no-untyped-def]
            with lock:
                first = not first_commit.is_set()
                first_commit.set()
            if first:
                seen.append(written_meanwhile.wait(timeout=60))
            return commit_task(task)

        committer.commit_task = commit
        return committer

    monkeypatch.setattr(local.StreamingWriter, "write_batches", counted_write)
    monkeypatch.setattr(local, "create_committer", committer_waiting_for_a_write)
    dest = f"file://{tmp_path}/out"
    LocalDriver(dest, workers=1).run(tables(4))
    assert seen == [True]
    assert most[0] == 1  # never two writers with one slot
    assert sorted(read_back(dest)["id"].to_pylist()) == list(range(120))


def test_task_attempts_share_one_store(tmp_path, monkeypatch) -> None:
    """Opening a store per attempt would make an S3 client (~40 ms of CPU) and new
    connections for every task: the attempts of a process share the factory's store."""
    from outcommit.engine import local

    stores = []
    create = local.create_committer

    def recording(*args, **kwargs):  # type: ignore[no-untyped-def]
        stores.append(kwargs.get("store"))
        return create(*args, **kwargs)

    monkeypatch.setattr(local, "create_committer", recording)
    dest = f"file://{tmp_path}/out"
    LocalDriver(dest, failures=[FailurePoint(task=1, point="mid-write")]).run(tables(3))
    driver, *attempts = stores  # the driver opens its own: the job's request counts stay its own
    assert driver is None and len(attempts) == 4
    assert attempts[0] is not None and all(s is attempts[0] for s in attempts)
    assert sorted(read_back(dest)["id"].to_pylist()) == list(range(90))


def test_local_driver_takes_bytes_row_group_and_codec_options(tmp_path) -> None:
    import pyarrow.parquet as pq

    dest = f"file://{tmp_path}/out"
    table = pa.table({"id": pa.array(range(20_000), pa.int64()),
                      "s": [f"{i:064d}" * 16 for i in range(20_000)]})
    LocalDriver(dest, max_bytes_per_file=1_000_000, row_group_size=500,
                compression="zstd").run([table])
    files = sorted((tmp_path / "out").glob("*.parquet"))
    assert len(files) > 1 and all(f.stat().st_size < 1_100_000 for f in files)
    meta = pq.ParquetFile(files[0]).metadata
    assert max(meta.row_group(i).num_rows for i in range(meta.num_row_groups)) == 500
    assert meta.row_group(0).column(0).compression == "ZSTD"
    assert read_back(dest).num_rows == 20_000


@pytest.mark.parametrize(("options", "data", "message"), [
    ({"compression": "snapy"}, None, "unknown Parquet compression 'snapy'"),
    ({"compression": "lzo"}, None, "cannot be written with pyarrow"),
    ({"partition_by": ["st"]}, pa.table({"id": [1], "st": [{"a": 1}]}),
     "cannot use struct<a: int64> for partition column 'st'"),
    ({"partition_by": ["b"]}, pa.table({"id": [1], "b": [b"x"]}),
     "cannot use binary for partition column 'b'"),
])
def test_bad_codec_or_partition_type_fails_before_any_task_runs(tmp_path, options, data,
                                                                message) -> None:
    from outcommit import ConfigError

    with pytest.raises(ConfigError, match=message):
        LocalDriver(f"file://{tmp_path}/out", **options).run([data] if data else tables(2))
    assert not (tmp_path / "out").exists()


def test_an_empty_job_leaves_a_readable_dataset(tmp_path) -> None:
    """Only _SUCCESS was written: a reader found no columns (user trial)."""
    dest = f"file://{tmp_path}/out"
    empty = tables(1)[0].slice(0, 0)
    LocalDriver(dest).run([empty, empty])
    assert len(list((tmp_path / "out").glob("*.parquet"))) == 1
    back = read_back(dest)
    assert back.num_rows == 0 and back.schema == empty.schema


def test_timestamp_partitions_keep_nanoseconds_and_four_digit_years(tmp_path) -> None:
    """Review findings: nanoseconds were dropped (two values, one directory) and years
    before 1000 lost their zero padding (Spark then read the column as strings)."""
    import datetime

    import pandas as pd

    values = [pd.Timestamp("2026-01-01 00:00:00.000000001"), pd.Timestamp("2026-01-01 00:00:00.000000002")]
    table = pa.Table.from_pandas(pd.DataFrame({"id": [1, 2], "ts": values}), preserve_index=False)
    LocalDriver(f"file://{tmp_path}/ns", partition_by=["ts"]).run([table])
    assert sorted(p.name for p in (tmp_path / "ns").iterdir() if "=" in p.name) == [
        "ts=2026-01-01 00%3A00%3A00.000000001", "ts=2026-01-01 00%3A00%3A00.000000002"]
    assert escape_partition_value(datetime.datetime(999, 1, 1, 5)) == "0999-01-01 05%3A00%3A00"


@pytest.mark.parametrize("batches", [1, 2])
def test_two_instants_named_alike_in_a_clock_change_are_refused(batches, tmp_path) -> None:
    """Review finding: 01:30 PDT and 01:30 PST (an hour apart) both became
    ts=2026-11-01 01%3A30%3A00; read back, both rows had the first instant."""
    from outcommit import CommitError

    instants = pa.array([1793521800_000000, 1793525400_000000],
                        pa.timestamp("us", tz="America/Los_Angeles"))
    table = pa.table({"id": [1, 2], "ts": instants})
    parts = [table] if batches == 1 else [table.slice(0, 1), table.slice(1, 1)]
    source = [pa.Table.from_batches([b for p in parts for b in p.to_batches()])]
    with pytest.raises(CommitError, match="would share the directory"):
        LocalDriver(f"file://{tmp_path}/dst", partition_by=["ts"]).run(source)
    assert not [p for p in (tmp_path / "dst").rglob("*.parquet")]
