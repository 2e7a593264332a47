"""The batch protocol's stateful machines: what each tried, printed at the end of the run."""

from __future__ import annotations

from typing import Any

import pytest

#: (machine, examples, distinct rule sequences, distinct sequences with their targets, steps)
TRIED: list[tuple[str, int, int, int, int]] = []


@pytest.fixture
def tried_report() -> Any:
    """Call with a machine class after its run: its counts go to the run's summary."""
    def report(machine: Any) -> None:
        tried = machine.tried
        TRIED.append((machine.__name__, tried.examples, len(tried.sequences), len(tried.detailed),
                      sum(tried.steps.values())))
    return report


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not TRIED:
        return
    terminalreporter.section("batch protocol machines: interleavings tried")
    terminalreporter.write_line(f"{'machine':<34} {'examples':>8} {'rule sequences':>15} "
                                f"{'with targets':>13} {'steps':>7}")
    for name, examples, sequences, detailed, steps in TRIED:
        terminalreporter.write_line(f"{name:<34} {examples:>8} {sequences:>15} {detailed:>13} {steps:>7}")
