"""``outcommit check`` against the GCS emulators (issue 29, item 6): a good configuration, a
missing bucket, and a declared capability the server does not keep: gcp-storage-emulator
ignores ``ifGenerationMatch=0``, so with ``outcommit.gcs.preconditions=true`` the probe of
exclusive create fails the check (fake-gcs-server enforces it: the probe passes)."""

from __future__ import annotations

from typing import Any

import pytest

import outcommit
from outcommit.cli import main

pytestmark = pytest.mark.gcs


def conf(config: dict[str, Any]) -> list[str]:
    return [arg for key, value in config.items() for arg in ("--conf", f"{key}={value}")]


def lines(out: str) -> dict[str, list[str]]:
    found = {}
    for line in out.splitlines():
        words = line.split()
        name = " ".join(words[:2]) if words[0] == "capability" else words[0]
        found[name] = words[2:] if words[0] == "capability" else words[1:]
    return found


def test_a_good_configuration_passes_and_leaves_nothing(gcs_root: str, gcs_config: dict[str, Any],
                                                       capsys) -> None:
    assert main(["check", gcs_root, *conf(gcs_config)]) == 0
    found = lines(capsys.readouterr().out)
    assert found["endpoint"][:2] == ["ok", gcs_config["outcommit.gcs.endpoint"]]
    assert found["bucket"][:2] == ["ok", "gs://outcommit-tests"]
    assert found["capability fs.create.exclusive"] == ["no", "(declared)"]  # preconditions=false here
    assert found["capability fs.listing.consistent"] == ["yes", "(probed)"]
    assert found["committer"][0] == "manifest"
    store = outcommit.open_store(gcs_root, gcs_config)
    assert store.list_files(store.strip(gcs_root)) == []


def test_a_declared_capability_the_server_ignores_fails_its_probe(gcs_root: str, gcs_config: dict[str, Any],
                                                                   capsys) -> None:
    assert main(["check", gcs_root, *conf({**gcs_config, "outcommit.gcs.preconditions": "true"})]) == 1
    found = lines(capsys.readouterr().out)
    assert found["capability fs.create.exclusive"][:3] == ["NO", "(declared,", "but"]
    assert "the server does not enforce it)" in " ".join(found["capability fs.create.exclusive"])


def test_a_server_that_keeps_preconditions_passes_the_probe(fake_gcs_root: str,
                                                           fake_gcs_config: dict[str, Any], capsys) -> None:
    assert main(["check", fake_gcs_root, *conf(fake_gcs_config)]) == 0
    assert lines(capsys.readouterr().out)["capability fs.create.exclusive"] == ["yes", "(probed)"]


def test_a_missing_bucket_is_the_line_that_fails(gcs_config: dict[str, Any], capsys) -> None:
    assert main(["check", "gs://no-such-bucket-here/t", *conf(gcs_config)]) == 1
    assert lines(capsys.readouterr().out)["bucket"][:2] == ["missing", "the"]
