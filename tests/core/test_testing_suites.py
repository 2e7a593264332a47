"""The suites a plugin author binds (issue 29, item 7): a failing oracle shows its values
(pytest's assertion rewriting, registered by ``outcommit.testing``); a binding may give one
fixed root, as with a real bucket (the suites work in a new directory per test and remove
it); without pytest the suites say which extra brings it. Each case runs pytest as a plugin
author does, in a process of its own with a configuration of its own."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

BINDINGS = '''
import pytest

from outcommit.config import Config
from outcommit.stores.local import LocalStore
from outcommit.testing.conformance import CommitterConformance
from outcommit.testing.stores import StoreContract

ROOT = {root!r}


class TestFixedRootContract(StoreContract):
    @pytest.fixture
    def store_root(self):
        return f"file://{{ROOT}}/contract"


class TestFixedRootV1(CommitterConformance):
    task_publish_operation = "rename_dir"

    @pytest.fixture
    def committer_name(self):
        return "v1"

    @pytest.fixture
    def destination_root(self):
        return f"file://{{ROOT}}/v1"


class Misreading(LocalStore):
    def read_bytes(self, path):
        return b"wrong"


class TestMisreadingStore(StoreContract):
    @pytest.fixture
    def store_root(self):
        return f"file://{{ROOT}}/misreading"

    @pytest.fixture
    def store(self, root_url):
        return Misreading(root_url, Config())
'''


def _pytest(directory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (directory / "pytest.ini").write_text("[pytest]\n")  # not the project's configuration
    env = {**os.environ, "OUTCOMMIT_DISABLE_PLUGIN_AUTOLOAD": "1"}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-c",
                           str(directory / "pytest.ini"), "--rootdir", str(directory), *args],
                          cwd=directory, env=env, capture_output=True, text=True, timeout=300)


def test_a_fixed_root_passes_and_is_left_empty(tmp_path: Path) -> None:
    """24 of 48 tests failed when a binding gave the same root to every test."""
    root = tmp_path / "fixed"
    (tmp_path / "test_bindings.py").write_text(BINDINGS.format(root=str(root)))
    result = _pytest(tmp_path, "test_bindings.py", "-q", "-k", "FixedRoot")
    assert result.returncode == 0, result.stdout[-3000:]
    assert " failed" not in result.stdout and " passed" in result.stdout
    left = [p for p in root.rglob("*") if p.is_file()] if root.exists() else []
    assert left == []


def test_a_failing_oracle_shows_its_values(tmp_path: Path) -> None:
    (tmp_path / "test_bindings.py").write_text(BINDINGS.format(root=str(tmp_path / "r")))
    result = _pytest(tmp_path, "test_bindings.py", "-q", "-k",
                     "TestMisreadingStore and test_write_then_read_and_info")
    assert result.returncode == 1, result.stdout[-3000:]
    # Rewritten: the comparison with both of its sides, not a bare AssertionError.
    assert "AssertionError: assert b'wrong' == b'hello'" in result.stdout, result.stdout[-3000:]


def test_without_pytest_the_suites_name_the_extra(tmp_path: Path) -> None:
    for module in ("outcommit.testing.conformance", "outcommit.testing.stores"):
        code = textwrap.dedent(f"""
            import sys
            sys.modules["pytest"] = None  # as where pytest is not installed
            import {module}
        """)
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                timeout=120, cwd=tmp_path)
        assert result.returncode == 1
        last = result.stderr.strip().splitlines()[-1]
        assert last.startswith(f"outcommit.errors.MissingDependencyError: {module} (the "), last
        assert "needs pytest, which is not installed: pip install " in last
        assert "[testing]" in last and "(the 'testing' extra of outcommit)" in last
    # The fault injection needs no pytest.
    code = "import sys; sys.modules['pytest'] = None; from outcommit.testing import Fault"
    assert subprocess.run([sys.executable, "-c", code], timeout=120).returncode == 0
