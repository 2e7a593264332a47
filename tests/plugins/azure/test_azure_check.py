"""``outcommit check`` against Azurite (issue 29, item 6): a good configuration, a key the
account refuses, a container that is not there."""

from __future__ import annotations

from typing import Any

import pytest
from test_azure_credentials import conf_args, with_wrong_key

import outcommit
from outcommit.cli import main

pytestmark = pytest.mark.azure


def lines(out: str) -> dict[str, list[str]]:
    found = {}
    for line in out.splitlines():
        words = line.split()
        name = " ".join(words[:2]) if words[0] == "capability" else words[0]
        found[name] = words[2:] if words[0] == "capability" else words[1:]
    return found


def test_a_good_configuration_passes_and_leaves_nothing(azure_root: str, azure_config: dict[str, Any],
                                                       capsys) -> None:
    assert main(["check", azure_root, *conf_args(azure_config)]) == 0
    found = lines(capsys.readouterr().out)
    assert found["endpoint"][0] == "ok" and found["endpoint"][1].endswith("/devstoreaccount1")
    assert found["credentials"] == ["ok", "accepted"] and found["bucket"][:2] == ["ok", "abfs://outcommit-tests"]
    assert found["capability fs.create.exclusive"] == ["yes", "(probed)"]
    assert found["capability fs.blocklist.delayed-completion"] == ["yes", "(declared)"]
    assert found["committer"][0] == "blocklist"
    store = outcommit.open_store(azure_root, azure_config)
    assert store.list_files(store.strip(azure_root)) == []


def test_a_key_the_account_refuses_is_the_line_that_fails(azure_root: str, azure_config: dict[str, Any],
                                                           capsys) -> None:
    assert main(["check", azure_root, *conf_args(with_wrong_key(azure_config))]) == 1
    found = lines(capsys.readouterr().out)
    assert found["credentials"][:5] == ["failed", "Azure", "Storage", "rejected", "the"]


def test_a_missing_container_is_the_line_that_fails(azure_config: dict[str, Any], capsys) -> None:
    assert main(["check", "abfs://no-such-container/t", *conf_args(azure_config)]) == 1
    found = lines(capsys.readouterr().out)
    assert found["bucket"][:2] == ["missing", "the"] and "abfs://no-such-container" in found["bucket"]
