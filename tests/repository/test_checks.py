"""The repository's own checks run in the test suite: lint and strict typing of every distribution."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_pre_commit_hooks_pass_on_the_whole_tree() -> None:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    bin_dir = str(Path(sys.executable).parent)  # the hooks run this environment's ruff and mypy
    result = subprocess.run(
        [sys.executable, "-m", "pre_commit", "run", "--all-files", "--show-diff-on-failure"],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
        env={**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")})
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ruff" in result.stdout and "mypy" in result.stdout
