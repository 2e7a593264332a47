"""What a job logs (issue 29, item 6): one INFO line per step -- job setup (committer and
conflict mode, each with what chose it), each task commit, job commit with its counts --
and the details (configuration, metrics, diagnostics) at DEBUG; and ``_SUCCESS`` records
the conflict mode with the key that set it, as its user spelled it."""

from __future__ import annotations

import logging

import pyarrow as pa
import pytest

import outcommit
from outcommit import JobContext, load_success


def run_job(url: str, config: dict[str, str]) -> outcommit.SuccessData:
    committer = outcommit.create_committer(url, config)
    job = JobContext(url, config=committer.config)
    committer.setup_job(job)
    messages = []
    for index in range(2):
        task = job.task_attempt(index)
        committer.setup_task(task)
        committer.filesystem(task).pipe_file(f"{committer.work_path(task)}/part-{index}.csv", b"1\n")
        messages.append(committer.commit_task(task))
    return committer.commit_job(job, messages)


def test_one_info_line_per_step_and_the_details_at_debug(tmp_path, caplog) -> None:
    url = f"file://{tmp_path}/out"
    with caplog.at_level(logging.DEBUG, logger="outcommit"):
        run_job(url, {"spark.hadoop.fs.s3a.committer.staging.conflict-mode": "append",
                      "outcommit.committer.threads": "2"})
    info = [r.getMessage() for r in caplog.records
            if r.levelno == logging.INFO and r.name.startswith("outcommit")]
    assert len(info) == 4, info  # setup, two task commits, job commit
    assert info[0].endswith("committer v1 (default committer for file://), conflict mode append "
                            "(spark.hadoop.fs.s3a.committer.staging.conflict-mode)")
    assert info[0].startswith("[job ") and f"set up job attempt 0 in {url}/_temporary/" in info[0]
    assert "committed task" in info[1] and "committed task" in info[2]
    assert info[3].endswith(f"committed job to {url}: 2 files from 2 tasks in "
                            f"{info[3].rsplit(' in ', 1)[1]}")
    assert not any("{" in line for line in info)  # no dict at INFO
    debug = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    assert any(line.startswith("committer v1 for ") and "config {" in line for line in debug)
    assert any("_SUCCESS metrics {" in line and "diagnostics {" in line for line in debug)


def test_a_delayed_completion_committer_logs_one_line_per_step_too(s3_config, s3_root, caplog) -> None:
    """magic logged its job commit itself (no bytes) beside the shared line: one now."""
    with caplog.at_level(logging.INFO, logger="outcommit"):
        run_job(s3_root, {**s3_config, "fs.s3a.committer.name": "magic"})
    info = [r.getMessage() for r in caplog.records
            if r.levelno == logging.INFO and r.name.startswith("outcommit")]
    assert len(info) == 4, info
    assert "committer magic (fs.s3a.committer.name=magic), conflict mode" in info[0]
    assert f"committed job to {s3_root}: 2 files, 4 bytes from 2 tasks in " in info[3]


def test_success_records_the_conflict_mode_and_the_key_that_set_it(tmp_path) -> None:
    url = f"file://{tmp_path}/out"
    summary = run_job(url, {"spark.outcommit.committer.conflict-mode": "replace"})
    store = outcommit.open_store(url)
    report = load_success(store, f"{store.strip(url)}/_SUCCESS")
    assert report.diagnostics["conflict-mode"] == "replace" == summary.diagnostics["conflict-mode"]
    assert report.diagnostics["conflict-mode.source"] == "spark.outcommit.committer.conflict-mode"
    assert run_job(f"file://{tmp_path}/other", {}).diagnostics["conflict-mode.source"] == "the default of v1"


@pytest.mark.parametrize(("given", "source"), [
    ({"existing_data_behavior": "overwrite_or_ignore"}, "existing_data_behavior='overwrite_or_ignore'"),
    ({"config": {"spark.outcommit.committer.conflict-mode": "append"}},
     "spark.outcommit.committer.conflict-mode"),
    ({}, "write_dataset's default, existing_data_behavior='error'"),
])
def test_write_dataset_reports_where_its_conflict_mode_came_from(tmp_path, given, source) -> None:
    """A conflict mode set under another spelling was overridden by pyarrow's default
    'error' (the raw key alone was looked for): this append failed on existing data."""
    url = str(tmp_path / "out")
    outcommit.write_dataset(pa.table({"x": [1]}), url)
    if not given:
        url = str(tmp_path / "fresh")
    result = outcommit.write_dataset(pa.table({"x": [2]}), url, **given)
    assert result.summary.diagnostics["conflict-mode.source"] == source
