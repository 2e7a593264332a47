"""The outcommit command line."""

from __future__ import annotations

import argparse
import json
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


def test_durations() -> None:
    assert parse_duration("90s") == timedelta(seconds=90)
    assert parse_duration("12h") == timedelta(hours=12)
    assert parse_duration("7d") == timedelta(days=7)
    with pytest.raises(argparse.ArgumentTypeError, match="invalid duration"):
        parse_duration("soon")


def test_bad_conf_pair(tmp_path, capsys) -> None:
    assert main(["capabilities", str(tmp_path), "--conf", "novalue"]) == 2
    assert "use KEY=VALUE" in capsys.readouterr().err
