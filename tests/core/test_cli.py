"""The outcommit command line."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from datetime import timedelta

import pytest

from outcommit.cli import main, parse_duration


def test_capabilities_of_the_local_filesystem(tmp_path, capsys) -> None:
    assert main(["capabilities", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "yes  fs.rename.directory.atomic" in out and "no   fs.multipart.delayed-completion" in out
    assert "default committer: v1" in out
    assert main(["capabilities", "memory://x", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["capabilities"]["fs.rename.file.atomic"] is True
    assert "v1" in info["safe_committers"]


def test_unknown_scheme_is_a_one_line_error(capsys) -> None:
    assert main(["capabilities", "nosuch://b/x"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("outcommit capabilities: no store registered for scheme 'nosuch'")


def test_uploads_on_a_store_without_multipart(tmp_path, capsys) -> None:
    assert main(["uploads", "list", str(tmp_path)]) == 2
    assert "has no multipart uploads" in capsys.readouterr().err
    assert main(["uploads", "list", str(tmp_path), "--json"]) == 2
    assert json.loads(capsys.readouterr().out)["message"] == "file:// has no multipart uploads to list"


def test_durations() -> None:
    assert parse_duration("90s") == timedelta(seconds=90)
    assert parse_duration("12h") == timedelta(hours=12)
    assert parse_duration("7d") == timedelta(days=7)
    with pytest.raises(argparse.ArgumentTypeError, match="invalid duration"):
        parse_duration("soon")


def test_bad_conf_pair(tmp_path, capsys) -> None:
    assert main(["capabilities", str(tmp_path), "--conf", "novalue"]) == 2
    assert "use KEY=VALUE" in capsys.readouterr().err


def test_a_misspelled_conf_key_is_refused_with_a_guess(tmp_path, capsys) -> None:
    """The CLI reads stores with the user's --conf: a typo there is an error, as in a job."""
    assert main(["uploads", "list", str(tmp_path), "--conf", "outcommit.comitter=v1"]) == 2
    error = capsys.readouterr().err
    assert "unknown configuration key 'outcommit.comitter': did you mean outcommit.committer " in error
    assert main(["capabilities", str(tmp_path), "--conf", "outcommit.comitter=v1"]) == 2
    assert "did you mean outcommit.committer " in capsys.readouterr().err


def test_an_error_with_json_is_json_on_stdout(tmp_path, capsys) -> None:
    assert main(["uploads", "list", str(tmp_path), "--json", "--conf", "outcommit.comitter=v1"]) == 2
    out, err = capsys.readouterr()
    assert json.loads(out)["error"] == "ConfigError" and "outcommit.comitter" in json.loads(out)["message"]
    assert "did you mean" in err


def _cli(*args: str, stdout: int | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "outcommit.cli", *args], text=True,
                          capture_output=stdout is None, stdout=stdout,
                          stderr=subprocess.PIPE if stdout is not None else None, timeout=120)


def test_every_command_has_json_and_examples() -> None:
    from outcommit.cli import build_parser

    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert {"plugins", "config", "capabilities", "success", "uploads", "demo"} <= set(commands)
    for name, command in commands.items():               # plugins' commands too
        help_text = command.format_help()
        assert "--json" in help_text and "examples:\n  outcommit " + name in help_text, name
        assert "``" not in help_text  # plain text, no raw RST
        for action in command._actions:
            assert action.help, f"outcommit {name}: {action.option_strings or action.dest} has no help"


def test_a_closed_pipe_ends_quietly() -> None:
    """'outcommit config | head -1': the reader has gone before we write."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        result = _cli("config", stdout=write_end)
    finally:
        os.close(write_end)
    assert result.returncode == 141
    assert "Traceback" not in result.stderr and "BrokenPipeError" not in result.stderr


def test_success_on_a_zero_byte_marker_is_a_legacy_report(tmp_path) -> None:
    (tmp_path / "_SUCCESS").write_bytes(b"")  # what Spark's own FileOutputCommitter leaves
    result = _cli("success", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "legacy FileOutputCommitter marker: no report" in result.stdout
    assert json.loads(_cli("success", str(tmp_path), "--json").stdout)["legacy"] is True


def test_every_answer_of_success_and_jobs_abort_is_json_with_json(tmp_path, capsys) -> None:
    """`success --json` of a missing report printed nothing on stdout, `jobs abort --json`
    printed text: a script reading stdout could not parse either."""
    result = _cli("success", str(tmp_path), "--json")
    assert result.returncode == 1
    assert json.loads(result.stdout) == {"url": f"file://{tmp_path}/_SUCCESS", "success": False,
                                         "error": "NotCommitted", "message": result.stderr.strip()}

    dest = f"file://{tmp_path}/out"
    _committer, job, _messages = _v1_job(dest, "part-0.txt")  # set up, then its driver died
    abort = ["jobs", "abort", dest, job.job_id, "--committer", "v1", "--interrupted", "--json"]
    assert main(abort) == 1
    dry = json.loads(capsys.readouterr().out)
    assert (dry["jobId"], dry["status"], dry["aborted"]) == (job.job_id, "live", False)
    assert "--force" in dry["message"]
    assert main([*abort, "--force"]) == 0
    done = json.loads(capsys.readouterr().out)
    assert (done["jobId"], done["committer"], done["aborted"]) == (job.job_id, "v1", True)
    assert main(["jobs", "list", dest, "--committer", "v1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_success_under_a_file_is_not_committed_not_a_traceback(tmp_path) -> None:
    """Store.info of a path under a regular file raised NotADirectoryError."""
    (tmp_path / "part-0.csv").write_text("1\n")
    result = _cli("success", f"file://{tmp_path}/part-0.csv")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.startswith(f"no _SUCCESS at file://{tmp_path}/part-0.csv/_SUCCESS")


def test_config_lists_every_key_with_its_plugin_and_aliases() -> None:
    keys = {k["key"]: k for k in json.loads(_cli("config", "--json").stdout)}
    assert keys["outcommit.committer.threads"]["plugin"] == "outcommit"
    assert "fs.s3a.committer.threads" in keys["outcommit.committer.threads"]["aliases"]
    assert keys["outcommit.s3.endpoint"]["plugin"] == "s3"


def test_jobs_lists_and_aborts_what_a_failed_abort_kept(tmp_path, capsys) -> None:
    """A v1 job commit published its files and failed at _SUCCESS; the abort could not
    delete them, so it kept the job's state: 'outcommit jobs' shows the job, and its abort
    removes the files and the state (without --force it only says what it would do)."""
    import outcommit
    from outcommit import JobContext
    from outcommit.success import SUCCESS_FILE
    from outcommit.testing.conformance import visible_files
    from outcommit.testing.faults import Fault, FaultInjectingStore, failing_deletes_in

    dest = f"file://{tmp_path}/out dir"
    inner = outcommit.open_store(dest)
    store = FaultInjectingStore(inner, [Fault("save_json", path_contains=SUCCESS_FILE, times=-1)])
    committer = outcommit.create_committer(dest, committer="v1", store=store)
    job = JobContext(dest, config=committer.config)
    committer.setup_job(job)
    task = job.task_attempt(0)
    committer.setup_task(task)
    committer.filesystem(task).pipe_file(f"{committer.work_path(task)}/part-0.txt", b"data")
    message = committer.commit_task(task)
    with pytest.raises(outcommit.JobCommitError):
        committer.commit_job(job, [message])
    refusing = FaultInjectingStore(inner, failing_deletes_in(inner.strip(dest)))
    first = outcommit.create_committer(dest, committer="v1", store=refusing)
    first.abort_job(job)
    first.cleanup_job(job)
    assert visible_files(inner, inner.strip(dest)) == {"part-0.txt": b"data"}

    assert main(["jobs", "list", dest, "--committer", "v1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == [
        {"jobId": job.job_id, "attempts": [0], "status": "abort-kept", "committer": "v1",
         "state": f"{dest}/_temporary/{job.job_id}"}]
    assert main(["jobs", "abort", dest, job.job_id, "--committer", "v1"]) == 1
    assert "--force to abort it" in capsys.readouterr().out
    assert visible_files(inner, inner.strip(dest)) == {"part-0.txt": b"data"}
    assert main(["jobs", "abort", dest, "no-such-job", "--committer", "v1"]) == 2
    assert "nothing to abort" in capsys.readouterr().err
    assert main(["jobs", "abort", dest, job.job_id, "--committer", "v1", "--force"]) == 0
    assert f"aborted job {job.job_id}" in capsys.readouterr().out
    assert visible_files(inner, inner.strip(dest)) == {}
    assert main(["jobs", "list", dest, "--committer", "v1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


def _v1_job(dest: str, name: str, store=None):  # type: ignore[no-untyped-def]
    """A v1 job with one task writing ``name``, set up and its task committed."""
    import outcommit
    from outcommit import JobContext

    committer = outcommit.create_committer(dest, committer="v1", store=store)
    job = JobContext(dest, config=committer.config)
    committer.setup_job(job)
    task = job.task_attempt(0)
    committer.setup_task(task)
    committer.filesystem(task).pipe_file(f"{committer.work_path(task)}/{name}", name.encode())
    return committer, job, [committer.commit_task(task)]


def test_jobs_abort_refuses_a_job_whose_commit_may_have_finished(tmp_path, capsys) -> None:
    """Job A committed, but its driver died deleting its state; then job B committed into
    the same destination, its _SUCCESS replacing A's. Nothing tells A's finished commit
    from an interrupted one, so 'jobs abort' refuses (its abort would delete a.txt) unless
    told --interrupted; a live job likewise."""
    import outcommit
    from outcommit.committer import JOB_MARKER
    from outcommit.testing.conformance import visible_files
    from outcommit.testing.faults import Fault, FaultInjectingStore

    dest = f"file://{tmp_path}/out"
    inner = outcommit.open_store(dest)
    dying = FaultInjectingStore(inner, [Fault(  # the job ended (its marker went), then it died
        "delete", path_contains="_temporary", times=-1,
        predicate=lambda _op, args: not str(args[0]).endswith(JOB_MARKER))])
    _, job_a, messages = _v1_job(dest, "a.txt")
    outcommit.create_committer(dest, committer="v1", store=dying).commit_job(job_a, messages)
    b, job_b, messages = _v1_job(dest, "b.txt")
    b.commit_job(job_b, messages)
    live, job_live, _ = _v1_job(dest, "c.txt")
    assert main(["jobs", "list", dest, "--committer", "v1", "--json"]) == 0
    statuses = {row["jobId"]: row["status"] for row in json.loads(capsys.readouterr().out)}
    assert statuses == {job_a.job_id: "commit-began", job_live.job_id: "live"}
    for job in (job_a, job_live):
        assert main(["jobs", "abort", dest, job.job_id, "--committer", "v1", "--force"]) == 2
        assert "--interrupted" in capsys.readouterr().err
    assert visible_files(inner, inner.strip(dest)) == {"a.txt": b"a.txt", "b.txt": b"b.txt"}
    assert main(["jobs", "abort", dest, job_live.job_id, "--committer", "v1", "--force",
                 "--interrupted"]) == 0
    assert list(live.recovery.state.leftover_jobs()) == [job_a.job_id]


def test_jobs_abort_of_a_committed_job_keeps_its_output(tmp_path, capsys) -> None:
    import outcommit
    from outcommit.testing.conformance import visible_files
    from outcommit.testing.faults import Fault, FaultInjectingStore

    dest = f"file://{tmp_path}/out"
    inner = outcommit.open_store(dest)
    dying = FaultInjectingStore(inner, [Fault("delete", path_contains="_temporary", times=-1)])
    _, job, messages = _v1_job(dest, "a.txt")
    outcommit.create_committer(dest, committer="v1", store=dying).commit_job(job, messages)
    assert main(["jobs", "abort", dest, job.job_id, "--committer", "v1"]) == 1
    assert "(committed)" in capsys.readouterr().out
    assert main(["jobs", "abort", dest, job.job_id, "--committer", "v1", "--force"]) == 0
    assert visible_files(inner, inner.strip(dest)) == {"a.txt": b"a.txt"}
    assert outcommit.create_committer(dest, committer="v1").recovery.state.leftover_jobs() == {}


def test_jobs_acts_on_a_job_through_the_committer_that_made_it(tmp_path, capsys) -> None:
    """v1 and manifest share _temporary/: listed and aborted with the destination's default
    committer (v1), a live manifest job looked 'not-committed' and --force aborted it, so
    its driver's commit failed. The job's marker names its committer: it is listed and
    judged by that one, and an explicit --committer that contradicts it is refused."""
    import outcommit
    from outcommit.testing.conformance import visible_files

    dest = f"file://{tmp_path}/out"
    committer = outcommit.create_committer(dest, committer="manifest")
    job = outcommit.JobContext(dest)
    committer.setup_job(job)
    task = job.task_attempt(index=0)
    committer.setup_task(task)
    with committer.filesystem(task).open(committer.work_path(task) + "/part-0.csv", "wb") as f:
        f.write(b"id\n1\n")
    message = committer.commit_task(task)

    assert main(["jobs", "list", dest, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == [
        {"jobId": job.job_id, "attempts": [0], "status": "live", "committer": "manifest",
         "state": f"{dest}/_temporary/{job.job_id}"}]
    assert main(["jobs", "abort", dest, job.job_id, "--force"]) == 2
    assert "is live" in capsys.readouterr().err
    assert main(["jobs", "abort", dest, job.job_id, "--committer", "v1", "--force",
                 "--interrupted"]) == 2
    assert "set up by committer manifest" in capsys.readouterr().err
    # Nothing was touched: the driver commits its job.
    committer.commit_job(job, [message])
    store = outcommit.open_store(dest)
    assert visible_files(store, store.strip(dest)) == {"part-0.csv": b"id\n1\n"}


def test_a_marker_naming_a_committer_that_cannot_act_here_breaks_nothing(tmp_path, capsys) -> None:
    """Review finding: one job whose marker names a committer not installed here (or unsafe
    here, or a tampered marker) made 'jobs list' fail for every job."""
    import outcommit
    from outcommit.committer import JOB_MARKER

    dest = f"file://{tmp_path}/out"
    _, job_live, _ = _v1_job(dest, "c.txt")
    other = outcommit.create_committer(dest, committer="manifest")
    job_other = outcommit.JobContext(dest)
    other.setup_job(job_other)
    marker = tmp_path / "out" / "_temporary" / job_other.job_id / "00" / JOB_MARKER
    data = json.loads(marker.read_text())
    for name in ("bogus", "magic"):  # not installed; not safe on file://
        marker.write_text(json.dumps({**data, "committer": name}))
        assert main(["jobs", "list", dest, "--json"]) == 0
        rows = {row["jobId"]: row for row in json.loads(capsys.readouterr().out)}
        assert rows[job_live.job_id]["status"] == "live"
        assert (rows[job_other.job_id]["status"], rows[job_other.job_id]["committer"]) == ("unknown", name)
        assert main(["jobs", "abort", dest, job_other.job_id, "--force", "--interrupted"]) == 2
        assert f"set up by committer '{name}'" in capsys.readouterr().err
        assert marker.exists()


def _hadoop_v1_state(dest_dir) -> list:  # type: ignore[no-untyped-def]
    """What Hadoop's FileOutputCommitter (v1) leaves under a destination while its job runs,
    or after its driver died: _temporary/<appAttempt>/, with an attempt writing and a task
    committed. Nothing in it is outcommit's."""
    base = dest_dir / "_temporary" / "0"
    files = [base / "_temporary" / "attempt_202611271843_0001_m_000000_0" / "part-00000.parquet",
             base / "task_202611271843_0001_m_000001" / "part-00001.parquet"]
    for path in files:
        path.parent.mkdir(parents=True)
        path.write_bytes(b"PAR1")
    return files


def test_hadoops_own_temporary_state_is_foreign_and_deleted_only_when_named(tmp_path, capsys) -> None:
    """Issue 27 #8: Hadoop's _temporary/0 was listed as an outcommit v1 job "0"
    (not-committed), and 'jobs abort URL 0 --force' deleted it -- a running Spark job's
    output, say -- without --interrupted. Without an outcommit marker it is foreign: listed
    so, and deleted only with --foreign, which outcommit's own jobs refuse."""
    dest = f"file://{tmp_path}/out"
    hadoop = _hadoop_v1_state(tmp_path / "out")
    _, job, _ = _v1_job(dest, "c.txt")  # an outcommit job beside it: never touched
    assert main(["jobs", "list", dest, "--json"]) == 0
    rows = {row["jobId"]: row for row in json.loads(capsys.readouterr().out)}
    state = f"{dest}/_temporary"
    assert rows == {"0": {"jobId": "0", "attempts": [], "status": "foreign", "committer": None,
                          "state": f"{state}/0"},
                    job.job_id: {"jobId": job.job_id, "attempts": [0], "status": "live",
                                 "committer": "v1", "state": f"{state}/{job.job_id}"}}
    assert main(["jobs", "list", dest]) == 0
    listed = capsys.readouterr()
    assert f"0\tattempts none\tforeign\t-\t{state}/0" in listed.out
    assert "(1 foreign: not outcommit's)" in listed.err
    for flags in (["--force"], ["--force", "--interrupted"], ["--force", "--interrupted", "--json"]):
        assert main(["jobs", "abort", dest, "0", *flags]) == 2
        refused = capsys.readouterr()
        assert "job 0 is foreign: it holds no outcommit marker" in refused.err
        assert "Add --foreign only if you know that nothing uses it" in refused.err
    assert all(path.exists() for path in hadoop)
    # --foreign names what it is for: outcommit's own job refuses it.
    assert main(["jobs", "abort", dest, job.job_id, "--force", "--interrupted", "--foreign"]) == 2
    assert "is live, outcommit's own state: --foreign is only for" in capsys.readouterr().err
    assert main(["jobs", "abort", dest, "0", "--foreign"]) == 1
    assert f"would delete file://{tmp_path}/out/_temporary/0, foreign state" in capsys.readouterr().out
    assert all(path.exists() for path in hadoop)
    assert main(["jobs", "abort", dest, "0", "--foreign", "--force", "--json"]) == 0
    done = json.loads(capsys.readouterr().out)
    assert (done["status"], done["aborted"], done["committer"]) == ("foreign", True, None)
    assert not (tmp_path / "out" / "_temporary" / "0").exists()
    assert (tmp_path / "out" / "_temporary" / job.job_id / "0" / "_job.json").exists()


def _stream_three_batches(dest: str) -> None:
    """Query query-1 commits batches 0..2 (5 rows, one file each) to ``dest``."""
    import pyarrow as pa

    from outcommit.engine.tasks import WriteSettings, write_attempt
    from outcommit.streaming import BatchIdentity, BatchTaskResult, StreamingSink

    sink = StreamingSink(dest, {}, "v1")
    for batch_id in range(3):
        identity = BatchIdentity("query-1", batch_id, "run-a")
        job = sink.begin_task(identity)
        assert job is not None
        table = pa.table({"id": pa.array(range(batch_id * 10, batch_id * 10 + 5), pa.int64())})
        attempt = write_attempt(sink.committer, job.task_attempt(0, 0), table.to_batches(), WriteSettings())
        sink.commit_batch(batch_id, [BatchTaskResult(identity, job.job_id, attempt)])


def test_success_on_a_streaming_destination_shows_its_batch_log(tmp_path, capsys) -> None:
    """A streaming destination has no _SUCCESS (its batch log is the report): `success` said
    "the job was not committed" of one with committed batches."""
    dest = f"file://{tmp_path}/events"
    _stream_three_batches(dest)

    assert main(["success", dest]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{dest}: a streaming destination: its batch log has 3 committed "
                          "batches (0..2) of query query-1, no _SUCCESS")
    assert "batch 2: job query-1-b2-rrun-a, v1, 1 files, 5 rows" in out
    assert main(["success", dest, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["streaming"], report["batches"], report["latestBatch"], report["queryId"]) == \
        (True, 3, 2, "query-1")
    assert report["rows"] == 15 and len(report["latest"]["files"]) == 1

    empty = tmp_path / "fresh"
    (empty / "_outcommit_log" / "_jobs").mkdir(parents=True)  # a query's first batch is running
    (empty / "_outcommit_log" / "_jobs" / "x.json").write_text("{}")
    assert main(["success", str(empty)]) == 1
    assert "streaming destination: its batch log has no committed batch yet" in capsys.readouterr().err


def test_success_on_a_streaming_destination_checks_every_logged_file(tmp_path, capsys) -> None:
    """A logged file deleted by hand: `success` fails naming it, as for a _SUCCESS report."""
    dest = f"file://{tmp_path}/events"
    _stream_three_batches(dest)
    (gone,) = (p for p in (tmp_path / "events").glob("part-*") if "-b1-" in p.name)
    gone.unlink()
    assert main(["success", dest]) == 2
    err = capsys.readouterr().err
    assert f"names 1 file(s) that are gone, e.g. file://{gone}" in err and len(err.splitlines()) == 1


def _tree(root) -> dict[str, bytes]:  # type: ignore[no-untyped-def]
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_jobs_abort_dry_run_shows_any_jobs_abort_and_changes_nothing(tmp_path, capsys) -> None:
    """Issue 29 #6: a crashed job that reads as live was refused even a look. --dry-run says
    what an abort would remove for every status (live, commit-began) and changes nothing."""
    import outcommit
    from outcommit.testing.faults import Fault, FaultInjectingStore

    dest = f"file://{tmp_path}/out"
    inner = outcommit.open_store(dest)
    dying = FaultInjectingStore(inner, [Fault("save_json", path_contains="_SUCCESS", times=-1)])
    committer, began, messages = _v1_job(dest, "a.txt", store=dying)
    with pytest.raises(outcommit.JobCommitError):
        committer.commit_job(began, messages)  # published a.txt, then died before _SUCCESS
    _, live, _ = _v1_job(dest, "b.txt")
    before = _tree(tmp_path)

    assert main(["jobs", "abort", dest, began.job_id, "--dry-run"]) == 0
    out = capsys.readouterr().out  # its driver died in its commit: its markers say live
    assert f"dry run, nothing changed: job {began.job_id} at {dest} is live" in out
    assert f"delete the files its interrupted commit published: 1\n    {dest}/a.txt\n" in out
    assert main(["jobs", "abort", dest, live.job_id, "--dry-run", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert (plan["status"], plan["committer"], plan["published"], plan["uploads"]) == ("live", "v1", [], [])
    assert plan["flags"] == ["--force", "--interrupted"]
    assert sorted(plan["state"]) == sorted(f"file://{p}" for p in (tmp_path / "out" / "_temporary" /
                                                                    live.job_id).rglob("*") if p.is_file())
    assert _tree(tmp_path) == before
    # Without --dry-run a live job still needs --interrupted, and says where to look first.
    assert main(["jobs", "abort", dest, live.job_id, "--force"]) == 2
    assert "--dry-run shows what its abort would remove" in capsys.readouterr().err
    assert _tree(tmp_path) == before


def test_batches_lists_a_streaming_destinations_committed_batches(tmp_path, capsys) -> None:
    """Issue 29 #6: no command showed the batch log. One line per batch (id, files, rows,
    committed at, job); a batch id shows its files; --json for scripts."""
    dest = f"file://{tmp_path}/events"
    _stream_three_batches(dest)

    assert main(["batches", dest]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"{dest}: 3 committed batches"
    assert [line.split()[:3] for line in lines[2:]] == [[str(b), "1", "5"] for b in range(3)]
    assert lines[4].endswith(" query-1-b2-rrun-a (v1)")
    assert main(["batches", dest, "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["batches"]
    assert [(b["batchId"], b["files"], b["rows"], b["jobId"]) for b in listed] == \
        [(b, 1, 5, f"query-1-b{b}-rrun-a") for b in range(3)]

    (written,) = (p for p in (tmp_path / "events").glob("part-*") if "-b1-" in p.name)
    assert main(["batches", dest, "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"{dest}: batch 1 of query query-1: job query-1-b1-rrun-a, v1, 1 files, 5 rows")
    assert out[1:] == [f"  file://{written}  5 rows  {written.stat().st_size} bytes"]
    assert main(["batches", dest, "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["files"][0]["url"] == f"file://{written}"


def test_batches_refuses_an_unknown_batch_and_a_batch_jobs_destination_in_one_line(tmp_path, capsys) -> None:
    dest = f"file://{tmp_path}/events"
    _stream_three_batches(dest)
    assert main(["batches", dest, "7"]) == 2
    err = capsys.readouterr().err
    assert err == (f"outcommit batches: {dest}: batch 7 is not in its batch log (committed: 0..2); "
                   "outcommit batches URL lists them\n")
    _v1_job(f"file://{tmp_path}/table", "a.txt")
    assert main(["batches", f"file://{tmp_path}/table"]) == 2
    err = capsys.readouterr().err
    assert "no streaming query has written to" in err and len(err.splitlines()) == 1
