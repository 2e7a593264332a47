"""``outcommit check URL`` (issue 29, item 6): one line per check, probes under a unique
prefix that is removed, and ``--full``, the two suites against the store, run as a user
runs it (the CLI, in a process of its own)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from outcommit.cli import main


def test_a_local_destination_is_checked_and_nothing_is_left(tmp_path: Path, capsys) -> None:
    dest = tmp_path / "not" / "yet"
    assert main(["check", str(dest)]) == 0
    out = capsys.readouterr().out.splitlines()
    checks = {line.split()[0] if not line.startswith(("capability", "suite")) else
              " ".join(line.split()[:2]): line.split() for line in out}
    assert checks["store"][1:3] == ["ok", "LocalStore"]
    assert checks["endpoint"][1] == "n/a" and checks["destination"][1:3] == ["ok", f"file://{dest}"]
    assert checks["capability fs.create.exclusive"][2:] == ["yes", "(probed)"]
    assert checks["capability fs.listing.consistent"][2:] == ["yes", "(probed)"]
    assert checks["capability fs.rename.directory.atomic"][2:] == ["yes", "(declared)"]
    assert checks["committer"][1:4] == ["v1", "default", "committer"]
    assert list(tmp_path.iterdir()) == []  # the probes' prefix and the directories made for it


def test_json_says_each_check_and_the_outcome(tmp_path: Path, capsys) -> None:
    assert main(["check", f"file://{tmp_path}", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is True and report["url"] == f"file://{tmp_path}"
    assert [c["check"] for c in report["checks"]][:5] == ["store", "endpoint", "credentials",
                                                          "destination", "write"]
    assert all(set(c) == {"check", "result", "detail", "ok", "ms"} for c in report["checks"])


def test_a_store_that_is_not_there_fails_in_one_line(capsys) -> None:
    assert main(["check", "nosuch://bucket/x"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("store failed no store registered for scheme 'nosuch'") and out.count("\n") == 1


def test_full_runs_both_suites_against_the_store_and_leaves_nothing(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "outcommit.cli", "check", f"file://{tmp_path}/t",
                           "--full", "--committer", "v1", "--committer", "manifest", "--json"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    suites = {c["check"]: c for c in json.loads(done.stdout)["checks"] if c["check"].startswith("suite")}
    assert sorted(suites) == ["suite conformance manifest", "suite conformance v1", "suite store contract"]
    for suite in suites.values():
        assert suite["ok"] and suite["result"] == "ok" and " passed" in suite["detail"], suite
        assert int(suite["detail"].split()[0]) >= 15
    assert list(tmp_path.iterdir()) == []
