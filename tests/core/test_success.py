"""_SUCCESS reports: Hadoop's format, validation of corrupt files, the CLI view."""

from __future__ import annotations

import json

import pytest

import outcommit
from outcommit import CorruptFileError, JobContext, SuccessData, load_success
from outcommit.cli import main
from outcommit.success import SUCCESS_NAME


@pytest.fixture
def committed(tmp_path):
    dest = str(tmp_path / "out")
    committer = outcommit.create_committer(dest)
    job = JobContext(dest, config=committer.config)
    committer.setup_job(job)
    task = job.task_attempt(0)
    committer.setup_task(task)
    with committer.filesystem(task).open(committer.work_path(task) + "/part-0.txt", "wb") as f:
        f.write(b"data")
    committer.commit_job(job, [committer.commit_task(task)])
    return tmp_path / "out", job


def test_success_is_hadoop_json_written_atomically(committed) -> None:
    out, job = committed
    data = json.loads((out / "_SUCCESS").read_text())
    assert data["name"] == SUCCESS_NAME
    assert data["jobId"] == job.job_id and data["jobIdSource"] == "generated"
    assert data["committer"] == "v1" and data["success"] is True
    assert data["filenames"] == [f"file://{out}/part-0.txt"]
    assert data["metrics"]["files.committed"] == 1
    assert {"hostname", "timestamp", "date", "diagnostics", "description"} <= set(data)
    assert [p.name for p in out.iterdir() if p.name.startswith("_SUCCESS")] == ["_SUCCESS"]


def test_filenames_are_capped_at_100() -> None:
    report = SuccessData.build(committer="v1", job_id="j", job_id_source="caller",
                               files=[f"f{i:04d}" for i in range(250)])
    assert len(report.filenames) == 100 and report.metrics["files.committed"] == 250


def test_marksuccessfuljobs_false_writes_no_success(tmp_path) -> None:
    dest = str(tmp_path / "out")
    committer = outcommit.create_committer(
        dest, {"mapreduce.fileoutputcommitter.marksuccessfuljobs": "false"})
    job = JobContext(dest, config=committer.config)
    committer.setup_job(job)
    summary = committer.commit_job(job, [])
    assert summary.success and not (tmp_path / "out" / "_SUCCESS").exists()


@pytest.mark.parametrize("content, field", [
    (b"", None),
    (b"{not json", None),
    (json.dumps({"name": "something else"}).encode(), "name"),
    (json.dumps({"name": SUCCESS_NAME, "committer": "v1", "jobId": "j", "success": "yes",
                 "timestamp": 1, "filenames": [], "metrics": {}, "diagnostics": {}}).encode(), "success"),
    (json.dumps({"name": SUCCESS_NAME, "committer": "v1", "success": True, "timestamp": 1,
                 "filenames": [], "metrics": {}, "diagnostics": {}}).encode(), "jobId"),
    (json.dumps({"name": SUCCESS_NAME, "committer": "v1", "jobId": "j", "success": True,
                 "timestamp": 1, "filenames": [1], "metrics": {}, "diagnostics": {}}).encode(), "filenames"),
])
def test_corrupt_success_is_a_clear_error(committed, content: bytes, field: str | None, capsys) -> None:
    out, _ = committed
    (out / "_SUCCESS").write_bytes(content)
    store = outcommit.open_store(str(out))
    with pytest.raises(CorruptFileError) as error:
        load_success(store, store.join(store.strip(str(out)), "_SUCCESS"))
    assert error.value.field == field
    assert str(out / "_SUCCESS") in str(error.value)
    if content:
        assert main(["success", str(out)]) == 2
        assert "_SUCCESS" in capsys.readouterr().err
    else:  # Hadoop's own zero-byte marker: no report to show, but not an error either
        assert main(["success", str(out)]) == 0
        assert "legacy FileOutputCommitter marker" in capsys.readouterr().out
    assert (out / "_SUCCESS").read_bytes() == content  # reading never changes anything


def test_cli_success_shows_a_valid_report(committed, capsys) -> None:
    out, job = committed
    assert main(["success", f"file://{out}"]) == 0
    shown = capsys.readouterr().out
    assert "valid _SUCCESS report" in shown and job.job_id in shown and "committer: v1" in shown
    assert main(["success", str(out / "_SUCCESS"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["jobId"] == job.job_id
    assert main(["success", str(out / "missing")]) == 1


def test_success_carries_hadoop_iostatistics(committed) -> None:
    out, _ = committed
    stats = json.loads((out / "_SUCCESS").read_text())["iostatistics"]
    assert set(stats) == {"counters", "gauges", "minimums", "maximums", "meanstatistics"}
    counters = stats["counters"]
    assert counters["committer_jobs_completed"] == 1
    assert counters["committer_tasks_completed"] == 1
    assert counters["committer_commits_completed"] == 1
    assert counters["committer_commit_job"] == 1
    assert stats["meanstatistics"]["committer_commit_job.mean"]["samples"] == 1
    assert load_success(outcommit.open_store(str(out)), str(out / "_SUCCESS")).iostatistics == stats


def test_commit_records_carry_the_job_id_as_fields(tmp_path, caplog) -> None:
    import logging

    dest = str(tmp_path / "logged")
    committer = outcommit.create_committer(dest)
    job = JobContext(dest, config=committer.config)
    with caplog.at_level(logging.INFO, logger="outcommit.committer"):
        committer.setup_job(job)
        task = job.task_attempt(0)
        committer.setup_task(task)
        with committer.filesystem(task).open(committer.work_path(task) + "/a.txt", "wb") as f:
            f.write(b"a")
        committer.commit_job(job, [committer.commit_task(task)])
    records = [r for r in caplog.records if r.name.startswith("outcommit.committer")]
    assert records and all(getattr(r, "job_id", None) == job.job_id for r in records)
    assert any(getattr(r, "task_attempt_id", None) == task.attempt_id for r in records)
    assert all(getattr(r, "committer", None) == "v1" for r in records)
