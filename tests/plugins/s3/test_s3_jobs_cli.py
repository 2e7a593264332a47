"""``outcommit jobs`` finds every committer's jobs, and ``jobs abort --dry-run`` shows what
any job's abort would remove and changes nothing (issue 29, item 6): ``jobs list URL`` said
"0 job(s) ... of magic's layout" beside a crashed ``directory`` job, and ``jobs abort``
refused even a dry run of a crashed job that read as live. On the moto server."""

from __future__ import annotations

import json
from typing import Any

import pytest
from s3_helpers import run_task, start

import outcommit
from outcommit.cli import main

pytestmark = pytest.mark.s3


@pytest.fixture
def config(s3_config: dict[str, Any]) -> dict[str, Any]:
    return {**s3_config, "outcommit.committer.unique-filenames": "false"}


def conf(config: dict[str, Any]) -> list[str]:
    return [arg for key, value in config.items() for arg in ("--conf", f"{key}={value}")]


def snapshot(url: str, config: dict[str, Any]) -> tuple[dict[str, bytes], list[tuple[str, str]]]:
    """Everything under ``url``: every object with its content, every pending upload."""
    store = outcommit.open_store(url, config)
    base = store.strip(url)
    files = {info.path: store.read_bytes(info.path) for info in store.list_files(base)}
    uploads = sorted((u.path, u.upload_id) for u in store.multipart().list_pending(base + "/"))
    return files, uploads


def test_every_committers_jobs_are_listed_and_a_dry_run_changes_nothing(config, s3_root, capsys):
    url = f"{s3_root}/events"
    # A driver that died: a directory job with a committed task, and a magic job writing.
    staging, job_d = start(url, config, "directory")
    run_task(staging, job_d, 0, {"d=1/a.csv": b"a"})
    magic, job_m = start(url, config, "magic")
    task = job_m.task_attempt(0)
    magic.setup_task(task)
    magic.filesystem(task).pipe_file(f"{magic.work_path(task)}/b.csv", b"b")  # pending, uncommitted

    assert main(["jobs", "list", url, "--json", *conf(config)]) == 0
    rows = {row["jobId"]: row for row in json.loads(capsys.readouterr().out)}
    assert {job: (row["status"], row["committer"]) for job, row in rows.items()} == {
        job_d.job_id: ("live", "directory"), job_m.job_id: ("live", "magic")}
    assert rows[job_d.job_id]["state"] == f"{url}/__staging_job-{job_d.job_id}"
    assert rows[job_m.job_id]["state"] == f"{url}/__magic_job-{job_m.job_id}"
    assert main(["jobs", "list", url, *conf(config)]) == 0
    assert "2 job(s) with temporary state under" in capsys.readouterr().err

    before = snapshot(url, config)
    assert before[1]  # the directory job's upload is pending
    assert main(["jobs", "abort", url, job_d.job_id, "--dry-run", *conf(config)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"dry run, nothing changed: job {job_d.job_id} at {url} is live: its markers "
                          "say it is running")
    assert f"--force --interrupted') would:\n  delete its temporary state, {url}/__staging_job-" in out
    assert "abort its pending uploads: 1\n" in out and f"{url}/d=1/a.csv " in out
    assert main(["jobs", "abort", url, job_d.job_id, "--dry-run", "--json", *conf(config)]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert (plan["dryRun"], plan["status"], plan["committer"]) == (True, "live", "directory")
    assert plan["flags"] == ["--force", "--interrupted"] and plan["published"] == []
    assert [u.split(" ")[0] for u in plan["uploads"]] == [f"{url}/d=1/a.csv"]
    assert snapshot(url, config) == before

    # Found without --committer, aborted through the committer that made it.
    assert main(["jobs", "abort", url, job_d.job_id, "--force", "--interrupted", *conf(config)]) == 0
    assert f"aborted job {job_d.job_id}" in capsys.readouterr().out
    assert main(["jobs", "list", url, "--json", *conf(config)]) == 0
    assert [row["jobId"] for row in json.loads(capsys.readouterr().out)] == [job_m.job_id]
    magic.abort_job(job_m)
    magic.cleanup_job(job_m)


def test_a_dry_run_of_an_interrupted_commit_lists_what_it_published(config, s3_root, capsys):
    """A commit that completed some uploads and died: its abort deletes exactly those."""
    from outcommit.testing.faults import Fault, FaultInjectingStore

    url = f"{s3_root}/interrupted"
    inner = outcommit.open_store(url, config)
    dying = FaultInjectingStore(inner, [Fault("multipart.complete", when="after", skip=1)])
    committer, job = start(url, config, "magic", store=dying)
    messages = [run_task(committer, job, i, {f"f{i}.csv": b"x"}) for i in range(3)]
    with pytest.raises(outcommit.JobCommitError):
        committer.commit_job(job, messages)
    before = snapshot(url, config)
    assert main(["jobs", "abort", url, job.job_id, "--dry-run", "--json", *conf(config)]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["status"] == "commit-began" and plan["flags"] == ["--force", "--interrupted"]
    visible = sorted(inner.url(p) for p in before[0] if "/__magic" not in p)
    assert plan["published"] == visible and len(visible) == 3  # completed, then the call failed
    assert snapshot(url, config) == before


def test_hadoops_own_temporary_state_on_s3_is_found_as_foreign(config, s3_root, capsys):
    """Hadoop's FileOutputCommitter leaves _temporary/0 on S3 too: in v1's layout, which is
    not safe on S3, and listed all the same; deleted only with --foreign."""
    url = f"{s3_root}/hadoop"
    store = outcommit.open_store(url, config)
    store.write_bytes(f"{store.strip(url)}/_temporary/0/_temporary/attempt_1/part-0.parquet", b"PAR1")
    assert main(["jobs", "list", url, "--json", *conf(config)]) == 0
    assert [(r["jobId"], r["status"], r["committer"]) for r in json.loads(capsys.readouterr().out)] == [
        ("0", "foreign", None)]
    assert main(["jobs", "abort", url, "0", "--dry-run", *conf(config)]) == 0
    assert "part-0.parquet" not in capsys.readouterr().out  # counted, not listed one by one
    assert main(["jobs", "abort", url, "0", "--foreign", "--force", *conf(config)]) == 0
    assert store.list_files(store.strip(url)) == []
