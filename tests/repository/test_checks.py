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


def test_the_test_tree_mirrors_the_source_tree() -> None:
    """Test modules have unique basenames (pytest imports them by basename, without packages)
    and live under a directory named after what they test (docs/architecture.md)."""
    modules = sorted(p.relative_to(ROOT / "tests") for p in (ROOT / "tests").rglob("test_*.py")
                     if "outcommit-testplugin" not in p.parts)
    assert len(modules) > 50
    names = [m.name for m in modules]
    assert sorted({n for n in names if names.count(n) > 1}) == []
    sources = {"core": ROOT / "core/src/outcommit", "plugins": ROOT / "plugins"}
    # The protocols' model-based tests drive every committer and store: no one module's.
    across = {Path("core/stateful")}
    for module in modules:
        top, *middle = module.parts[:-1]
        assert top in {"core", "plugins", "devtools", "benchmarks", "docs", "repository"}, module
        if module.parent in across:
            continue
        if top in sources and middle:   # tests/core/committers -> core/src/outcommit/committers
            assert (sources[top] / Path(*middle)).is_dir(), f"{module}: no {sources[top] / Path(*middle)}"
