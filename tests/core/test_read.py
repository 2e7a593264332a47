"""outcommit.read: exactly the committed files, whatever runs beside them."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from outcommit import CorruptFileError, NotCommittedError
from outcommit.engine.local import LocalDriver
from outcommit.read import committed_files, dataset, is_hidden


@pytest.mark.parametrize(("path", "hidden"), [
    ("date=1/part-0.parquet", False),
    ("_temporary/0/task_1/part-0.parquet", True),
    ("date=1/_temporary/part-0.parquet", True),
    ("__magic_job-1/part-0.parquet.pending", True),
    (".part-0.parquet.crc", True),
    ("date=1/.hidden/part-0.parquet", True),
    ("_year=2026/part-0.parquet", False),          # a partition named with a leading _
    ("_SUCCESS", True),
    ("_metadata", False),
    ("_common_metadata", False),
    ("part-0.parquet._COPYING_", True),
])
def test_hidden_paths_follow_sparks_rule(path, hidden):
    assert is_hidden(path) is hidden


def test_only_the_committed_files_of_a_running_destination(running_v1_destination):
    files = committed_files(running_v1_destination)
    assert len(files) == 12 and all("_temporary" not in f for f in files)
    assert all(f.startswith(running_v1_destination + "/date=2026-11-0") for f in files)
    table = dataset(running_v1_destination).to_table()
    assert table.num_rows == 3000 and sorted(table.column("id").to_pylist()) == list(range(3000))
    assert set(table.column("date").to_pylist()) == {"2026-11-01", "2026-11-02"}


def test_a_destination_no_job_committed_is_refused(tmp_path):
    url = f"file://{tmp_path}/never"
    (tmp_path / "never" / "_temporary").mkdir(parents=True)
    (tmp_path / "never" / "part-0.parquet").write_bytes(b"PAR1")
    with pytest.raises(NotCommittedError, match="no job has committed"):
        committed_files(url)
    assert committed_files(url, require_success=False) == [f"{url}/part-0.parquet"]


def test_a_file_gone_after_the_commit_is_named(tmp_path):
    url = f"file://{tmp_path}/gone"
    LocalDriver(url, committer="v1").run([pa.table({"id": [1]}), pa.table({"id": [2]})])
    victim = sorted(Path(tmp_path / "gone").glob("part-*"))[0]
    victim.unlink()
    with pytest.raises(CorruptFileError, match=f"gone, e.g. .*{victim.name}") as caught:
        committed_files(url)
    assert caught.value.field == "filenames"


def test_a_tampered_report_is_refused(tmp_path):
    url = f"file://{tmp_path}/tampered"
    LocalDriver(url, committer="v1").run([pa.table({"id": [1]})])
    marker = tmp_path / "tampered" / "_SUCCESS"
    report = json.loads(marker.read_text())
    marker.write_text(json.dumps({**report, "success": False}))
    with pytest.raises(CorruptFileError, match="success"):
        committed_files(url)
    marker.write_text("")                         # Spark's zero-byte marker: no report to trust
    with pytest.raises(CorruptFileError, match="_SUCCESS"):
        committed_files(url)


@pytest.mark.s3
def test_a_running_magic_job_on_s3_adds_nothing(s3_config, s3_root):
    import outcommit
    from outcommit.context import JobContext, TaskAttemptContext
    from outcommit.engine.writer import write_table

    url = f"{s3_root}/magic reads"
    LocalDriver(url, committer="magic", config=s3_config).run([pa.table({"id": [1, 2]})])
    config = {**s3_config, "outcommit.committer.conflict-mode": "append",
              "outcommit.magic.track-commits-in-memory": "false"}   # .pending files on the store
    committer = outcommit.create_committer(url, config, committer="magic")
    job = JobContext(url, config=config)
    committer.setup_job(job)
    task = TaskAttemptContext(job, 0, 0)
    committer.setup_task(task)
    write_table(committer.filesystem(task), committer.work_path(task), pa.table({"id": [3]}),
                task_index=0, job_id=job.job_id, attempt=0)
    committer.commit_task(task)
    store = outcommit.open_store(url, s3_config)
    everything = [store.url(f.path) for f in store.list_files(store.strip(url))]
    assert any("__magic" in f for f in everything)         # the running job's files are there
    assert [f.rsplit("/", 1)[1].startswith("part-") for f in committed_files(url, s3_config)] == [True]
    assert dataset(url, s3_config).count_rows() == 2


@pytest.mark.parametrize("committer", ["v1", "manifest"])
def test_a_committed_file_readers_skip_is_no_corruption(committer, tmp_path) -> None:
    """A task wrote _x.csv beside its data: _SUCCESS names it, readers skip it, and
    committed_files took the report for one naming a file that is gone."""
    import outcommit

    dest = f"file://{tmp_path}/out"
    c = outcommit.create_committer(dest, committer=committer)
    job = outcommit.JobContext(dest)
    c.setup_job(job)
    task = job.task_attempt(index=0)
    c.setup_task(task)
    for name in ("_x.csv", "part-0.csv"):
        with c.filesystem(task).open(f"{c.work_path(task)}/{name}", "wb") as f:
            f.write(b"id\n1\n")
    c.commit_job(job, [c.commit_task(task)])
    assert committed_files(dest) == [f"{dest}/part-0.csv"]


@pytest.mark.parametrize("committer", ["v1", "manifest"])
def test_conflict_modes_see_a_partition_named_with_a_leading_underscore(committer, tmp_path) -> None:
    """_src=a/ is data to Spark and to outcommit.read; conflict modes took it for hidden
    state: 'replace' kept its old rows beside the new ones and 'fail' let a job in."""
    from outcommit import CommitError

    dest = f"file://{tmp_path}/out"
    old = pa.table({"id": [100], "_src": ["a"]})
    LocalDriver(dest, committer=committer, partition_by=["_src"]).run([old])
    with pytest.raises(CommitError, match="already"):
        LocalDriver(dest, committer=committer, partition_by=["_src"],
                    config={"outcommit.committer.conflict-mode": "fail"}).run([old])
    LocalDriver(dest, committer=committer, partition_by=["_src"],
                config={"outcommit.committer.conflict-mode": "replace"}).run(
        [pa.table({"id": [1], "_src": ["b"]})])
    table = dataset(dest).to_table()
    assert sorted(zip(table["id"].to_pylist(), table["_src"].to_pylist(), strict=True)) == [(1, "b")]
