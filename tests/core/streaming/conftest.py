"""The streaming machine's interleavings tried, printed at the end of the run (as
tests/core/stateful/conftest.py does for the batch protocol's machines)."""

from __future__ import annotations

from typing import Any

import pytest

#: (machine, examples, distinct rule sequences, steps)
TRIED: list[tuple[str, int, int, int]] = []


@pytest.fixture
def tried_report() -> Any:
    """Call with a machine class after its run: its counts go to the run's summary."""
    def report(machine: Any) -> None:
        tried = machine.tried
        TRIED.append((machine.__name__, tried.examples, len(tried.sequences), sum(tried.steps.values())))
    return report


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not TRIED:
        return
    terminalreporter.section("streaming machine: interleavings tried")
    terminalreporter.write_line(f"{'machine':<28} {'examples':>8} {'rule sequences':>15} {'steps':>7}")
    for name, examples, sequences, steps in TRIED:
        terminalreporter.write_line(f"{name:<28} {examples:>8} {sequences:>15} {steps:>7}")
