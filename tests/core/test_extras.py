"""A missing optional requirement names the extra that brings it (issue 29, item 5): the
engines need pyarrow, and met its absence with a bare ``ModuleNotFoundError`` from deep
inside. (The suites' pytest: tests/core/test_testing_suites.py.)"""

from __future__ import annotations

import sys

import pytest

import outcommit
from outcommit.engine.local import LocalDriver
from outcommit.read import dataset

EXTRA = (r"needs pyarrow, which is not installed: pip install .*\[engine\].* "
         r"\(the 'engine' extra of outcommit\)")


@pytest.fixture
def without_pyarrow(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # as where it is not installed


def test_the_engines_name_the_extra_that_brings_pyarrow(without_pyarrow: None, tmp_path) -> None:
    with pytest.raises(ImportError, match=rf"^outcommit.write_dataset {EXTRA}") as raised:
        outcommit.write_dataset([], str(tmp_path / "out"))
    assert raised.value.name == "pyarrow"
    with pytest.raises(outcommit.MissingDependencyError, match=rf"^the local engine .*LocalDriver\) {EXTRA}"):
        LocalDriver(str(tmp_path / "out"))
    with pytest.raises(outcommit.MissingDependencyError, match=rf"^outcommit.read.dataset {EXTRA}"):
        dataset(str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()  # refused before anything was written
