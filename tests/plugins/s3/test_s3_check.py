"""``outcommit check`` against S3 (issue 29, item 6): the moto server with a good
configuration, a wrong endpoint, credentials it rejects (a second moto server that checks
them), none at all, a missing bucket; and ``--full``, the suites against it."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from typing import Any

import pytest

import outcommit
from outcommit.cli import main

pytestmark = pytest.mark.s3


def conf(config: dict[str, Any]) -> list[str]:
    return [arg for key, value in config.items() for arg in ("--conf", f"{key}={value}")]


def lines(out: str) -> dict[str, list[str]]:
    """Check name (with its capability) -> the words of its line."""
    found = {}
    for line in out.splitlines():
        words = line.split()
        name = " ".join(words[:2]) if words[0] in ("capability", "suite") else words[0]
        found[name] = words[1:] if name == words[0] else words[2:]
    return found


def test_a_good_configuration_passes_every_check_and_leaves_nothing(s3_server, s3_config, s3_root, capsys):
    url = f"{s3_root}/events"
    assert main(["check", url, *conf(s3_config)]) == 0
    found = lines(capsys.readouterr().out)
    assert found["endpoint"][:2] == ["ok", s3_server.endpoint_url] and found["endpoint"][-1] == "ms)"
    assert found["credentials"] == ["ok", "accepted"]
    assert found["bucket"][:2] == ["ok", "s3://outcommit-test"]
    for probed in ("fs.create.exclusive", "fs.multipart.delayed-completion", "fs.listing.consistent",
                   "fs.etags.available"):
        assert found[f"capability {probed}"] == ["yes", "(probed)"], probed
    assert found["capability fs.rename.file.atomic"] == ["no", "(declared)"]
    assert found["committer"][:4] == ["magic", "default", "committer", "for"]
    store = outcommit.open_store(url, s3_config)
    assert store.list_files(store.strip(s3_root)) == []
    assert store.multipart().list_pending(store.strip(s3_root) + "/") == []


def test_a_wrong_endpoint_is_the_line_that_fails(s3_config, s3_root, capsys):
    config = {**s3_config, "outcommit.s3.endpoint": "http://127.0.0.1:1"}
    assert main(["check", s3_root, *conf(config)]) == 1
    found = lines(capsys.readouterr().out)
    assert list(found) == ["store", "endpoint"]
    assert found["endpoint"][:5] == ["failed", "cannot", "reach", "the", "S3"]


def test_a_missing_bucket_is_the_line_that_fails(s3_config, capsys):
    assert main(["check", "s3://no-such-bucket-here/t", *conf(s3_config)]) == 1
    found = lines(capsys.readouterr().out)
    assert found["bucket"][:3] == ["missing", "the", "bucket"] and "create" in found["bucket"]
    assert list(found) == ["store", "endpoint", "credentials", "bucket"]


def test_no_credentials_are_the_line_that_fails(s3_config, s3_root, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    keyless = {k: v for k, v in s3_config.items() if "access-key" not in k and "secret-key" not in k}
    assert main(["check", s3_root, *conf(keyless)]) == 1
    found = lines(capsys.readouterr().out)
    assert found["credentials"][:4] == ["failed", "no", "AWS", "credentials"]
    assert found["bucket"][0] == "skipped"


@pytest.fixture(scope="module")
def checking_server() -> Iterator[str]:
    """A second moto server, in a process of its own, that checks credentials (moto reads
    INITIAL_NO_AUTH_ACTION_COUNT when it is imported: the shared server accepts any)."""
    code = textwrap.dedent("""
        import os, socket, sys
        os.environ["INITIAL_NO_AUTH_ACTION_COUNT"] = "0"
        from moto.server import ThreadedMotoServer
        probe = socket.socket(); probe.bind(("127.0.0.1", 0)); port = probe.getsockname()[1]; probe.close()
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
        server.start()
        print(port, flush=True)
        sys.stdin.read()  # serves until the test closes stdin
        server.stop()
    """)
    process = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True)
    assert process.stdout is not None and process.stdin is not None
    port = int(process.stdout.readline())  # printed once it serves
    yield f"http://127.0.0.1:{port}"
    process.stdin.close()
    process.wait(timeout=60)


def test_rejected_credentials_are_the_line_that_fails(checking_server, s3_config, capsys):
    config = {**s3_config, "outcommit.s3.endpoint": checking_server}
    assert main(["check", "s3://any-bucket/t", *conf(config)]) == 1
    found = lines(capsys.readouterr().out)
    assert found["endpoint"][:2] == ["ok", checking_server]
    assert found["credentials"][:6] == ["failed", "S3", "rejected", "the", "credentials", "for"]
    assert "InvalidAccessKeyId." in found["credentials"]


def test_full_runs_the_suites_against_the_bucket_and_leaves_nothing(s3_config, s3_root):
    """--full on the moto server, for one committer (each takes ~15 s here): the store
    contract and magic's conformance, under a prefix that is removed, pending uploads too."""
    done = subprocess.run([sys.executable, "-m", "outcommit.cli", "check", s3_root, "--full",
                           "--committer", "magic", "--json", *conf(s3_config)],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    suites = {c["check"]: c for c in json.loads(done.stdout)["checks"] if c["check"].startswith("suite")}
    assert sorted(suites) == ["suite conformance magic", "suite store contract"]
    assert all(s["ok"] and int(s["detail"].split()[0]) >= 15 for s in suites.values()), suites
    store = outcommit.open_store(s3_root, s3_config)
    assert store.list_files(store.strip(s3_root)) == []
    assert store.multipart().list_pending(store.strip(s3_root) + "/") == []
