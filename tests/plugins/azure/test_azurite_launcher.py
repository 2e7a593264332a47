"""The Azurite launcher's failures on a machine that cannot install it: clear messages."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from outcommit_azure.emulator import ensure_azurite


def test_missing_npm_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    with pytest.raises(RuntimeError, match="npm is not on PATH"):
        ensure_azurite(tmp_path / "azurite")


def test_failing_npm_install_is_named_with_its_output(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # An npm that cannot reach its registry: a real process that fails as npm would.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    npm = bin_dir / "npm"
    npm.write_text("#!/bin/sh\necho 'npm ERR! network request failed' >&2\nexit 1\n")
    npm.chmod(npm.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin")
    with pytest.raises(RuntimeError, match=r"installing Azurite failed.*network request failed"):
        ensure_azurite(tmp_path / "azurite")
