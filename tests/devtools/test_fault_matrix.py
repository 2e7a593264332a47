"""The fault matrix, CI size: one test per cell (``outcommit_devtools.faultmatrix``).

Every registered committer x every store binding (file, memory, moto S3, Azurite, the GCS
emulator, each network store behind a fault proxy) x every failure point: task attempts
that die or turn zombie, drivers killed with SIGKILL, HTTP faults, concurrent jobs. A
cell fails when it is WRONG: an oracle (docs/protocol.md#correctness-properties) failed
and no limit the committer declares (through its capabilities) explains it. Refused,
not-applicable and limit cells pass; the report (``python -m outcommit_devtools.faultmatrix``)
gives their reasons.

The matrix starts its own emulators, each in its own process (moto and the GCS emulator
in this process would compete with the matrix for the interpreter lock), and runs the
cells of the selected items when the first of them runs, in groups side by side (see
``Matrix.run_many``); each item then reports its own cell.

The last test checks that ``docs/reliability.md`` shows the matrix this run produced. A
stale table fails it; regenerate it with::

    python -m outcommit_devtools.faultmatrix --size ci --write-docs docs/reliability.md
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from outcommit_devtools.faultmatrix import Cell, CellResult, Matrix, plan, report
from outcommit_devtools.faultmatrix.bindings import Binding, open_bindings, started_servers

DOC = Path(__file__).resolve().parents[2] / "docs" / "reliability.md"
CELLS = plan("ci")
RESULTS: dict[str, CellResult] = {}
STORE_MARKS = {"s3": pytest.mark.s3, "azure": pytest.mark.azure, "gcs": pytest.mark.gcs}


@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Matrix]:
    """The matrix runner; a store's emulator and proxy start on first use."""
    bindings: dict[str, Binding] = {}
    with ExitStack() as stack:
        def binding(name: str) -> Binding:
            if name not in bindings:
                servers = stack.enter_context(started_servers([name]))
                bindings[name] = stack.enter_context(open_bindings([name], servers))[name]
            return bindings[name]

        yield Matrix(binding, str(tmp_path_factory.mktemp("faultmatrix")))


@pytest.fixture(scope="module")
def selected_results(request: pytest.FixtureRequest, matrix: Matrix) -> dict[str, CellResult]:
    """Every selected cell's result, computed once with the stores side by side."""
    selected = [item.callspec.params["cell"] for item in request.session.items
                if item.module is request.module and hasattr(item, "callspec")
                and "cell" in item.callspec.params]
    return {r.cell.id: r for r in matrix.run_many(selected)}


def _param(cell: Cell) -> Any:
    marks = [pytest.mark.faultmatrix, *([STORE_MARKS[cell.store]] if cell.store in STORE_MARKS else [])]
    return pytest.param(cell, id=cell.id, marks=marks)


@pytest.mark.parametrize("cell", [_param(c) for c in CELLS])
def test_cell(matrix: Matrix, selected_results: dict[str, CellResult], cell: Cell,
              record_property: Callable[[str, object], None]) -> None:
    result = selected_results.get(cell.id) or matrix.run(cell)
    RESULTS[cell.id] = result
    record_property("outcome", result.verdict.outcome)
    record_property("detail", result.verdict.detail)
    if result.verdict.outcome == "WRONG":
        pytest.fail(f"{cell.id} is WRONG: {result.verdict.detail}", pytrace=False)


@pytest.mark.faultmatrix
def test_reliability_doc_shows_this_matrix() -> None:
    missing = [c.id for c in CELLS if c.id not in RESULTS]
    if missing:
        pytest.skip(f"{len(missing)} cells did not run in this session (e.g. {missing[0]}): "
                    "the document is checked against a whole run of this file")
    results = [RESULTS[c.id] for c in CELLS]
    assert report.current_section(DOC, "ci") == report.docs_section(results, "ci"), (
        "docs/reliability.md does not show this run's matrix: regenerate it with "
        "`python -m outcommit_devtools.faultmatrix --size ci --write-docs docs/reliability.md`")
