"""``outcommit check URL --full``: the store contract and the committer conformance suites
(``outcommit.testing``) against the real store, under a new ``_outcommit_check_<id>/``
prefix of the destination, removed after.

Its own module because it is another kind of check than ``check.py``'s lines: it runs
pytest in this process, on a module generated to collect the suites' classes
(:func:`suite_classes`), and needs the testing extra.
"""

from __future__ import annotations

import contextlib
import io
import tempfile
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import capabilities as caps
from .check import PREFIX, Line, first_existing, remove, remove_made
from .extras import require
from .factory import normalise_url, open_store, scheme_of
from .plugins import get_registry


@dataclass
class _Run:
    root: str
    config: dict[str, Any]
    committers: list[str]


_RUN: _Run | None = None


@dataclass
class Suites:
    """The outcome of the suites, per class of tests."""

    passed: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    failed: dict[str, list[tuple[str, str]]] = field(default_factory=dict)

    def pytest_runtest_logreport(self, report: Any) -> None:
        """pytest's hook: each phase's report of each test."""
        suite = report.nodeid.split("::")[1] if "::" in report.nodeid else report.nodeid
        if report.failed:
            self.failed.setdefault(suite, []).append(
                (report.nodeid.split("::")[-1], (report.longreprtext or "").strip().splitlines()[-1:][0]
                 if report.longreprtext else ""))
        elif report.skipped and report.when in ("setup", "call"):
            self.skipped[suite] = self.skipped.get(suite, 0) + 1
        elif report.passed and report.when == "call":
            self.passed[suite] = self.passed.get(suite, 0) + 1


def suites_to_run(url: str, config: Mapping[str, Any], only: Sequence[str] = ()) -> list[str]:
    """The committers whose conformance a full check runs: those safe on the store (or
    ``only``), each needing its own class of tests."""
    registry = get_registry()
    store = open_store(url, config)
    try:
        safe = sorted(n for n, s in registry.committers().items()
                      if s.safe_on(store, scheme_of(url)))
    finally:
        store.close()
    unknown = sorted(set(only) - set(registry.committers()))
    if unknown:
        registry.committer_spec(unknown[0])  # raises, with "did you mean"
    return sorted(set(only)) if only else safe


def run_suites(url: str, config: Mapping[str, Any], committers: Sequence[str]) -> tuple[list[Line], str]:
    """Run the store contract and the conformance of ``committers`` under a new prefix of
    ``url``, removed after; (one line per suite, pytest's own report)."""
    require("pytest", "testing", "outcommit check --full")
    import pytest

    global _RUN
    url = normalise_url(url, get_registry().stores())
    root = f"{url.rstrip('/')}/{PREFIX}{uuid.uuid4().hex[:12]}"
    _RUN = _Run(root, dict(config), list(committers))
    outcome, output = Suites(), io.StringIO()
    store = open_store(url, config)
    kept = first_existing(store, store.strip(url))
    try:
        with tempfile.TemporaryDirectory(prefix="outcommit-check-") as tmp:
            ini, module = Path(tmp) / "pytest.ini", Path(tmp) / f"test_check_{uuid.uuid4().hex[:8]}.py"
            ini.write_text("[pytest]\nmarkers =\n    generative: hypothesis properties\n")
            module.write_text("from outcommit.checksuites import suite_classes\n\n"
                              "globals().update(suite_classes())\n")
            with contextlib.redirect_stdout(output):
                pytest.main([str(module), "-q", "-p", "no:cacheprovider", "-c", str(ini),
                             "--rootdir", tmp, "-o", "addopts=", "-W", "ignore::DeprecationWarning"],
                            plugins=[outcome])
    finally:
        _RUN = None
        try:
            remove(store, store.strip(root))
            remove_made(store, store.strip(url), kept)
        finally:
            store.close()
    return _suite_lines(outcome, committers), output.getvalue()


def _suite_lines(outcome: Suites, committers: Sequence[str]) -> list[Line]:
    lines = []
    for suite, label in [("TestStoreContract", "store contract"),
                         *((f"TestConformance_{name}", f"conformance {name}") for name in committers)]:
        passed, skipped = outcome.passed.get(suite, 0), outcome.skipped.get(suite, 0)
        failed = outcome.failed.get(suite, [])
        counts = f"{passed} passed, {skipped} skipped" + (f", {len(failed)} failed" if failed else "")
        if failed:
            names = "; ".join(f"{test}: {why}" for test, why in failed[:5])
            lines.append(Line(f"suite {label}", "failed", f"{counts}: {names}", ok=False))
        else:
            lines.append(Line(f"suite {label}", "ok" if passed else "failed", counts, ok=bool(passed)))
    return lines


def _conformance_faults(name: str, requires: Sequence[str]) -> tuple[Any, str | None]:
    """How the conformance suite makes a committer's job commit fail part-way, and how its
    task commit publishes (what a project's own binding of the suite says), by what the
    committer needs of the store."""
    from .testing.faults import Fault

    if caps.MULTIPART_DELAYED_COMPLETION in requires:
        return Fault("multipart.complete", when="after", skip=2), "create_exclusive"
    if caps.BLOCKLIST_DELAYED_COMPLETION in requires:
        return Fault("blocklist.complete", when="after", skip=2), "create_exclusive"
    if name == "v2":
        return Fault("save_json", path_contains="_SUCCESS"), None
    if name == "manifest":
        return Fault("rename_file", path_contains="/tasks/", skip=2, error=PermissionError), "rename_file"
    return Fault("rename_file", skip=1), "rename_dir"


def suite_classes() -> dict[str, type]:
    """The test classes of a full check's run (its generated module collects them):
    imported here, while pytest collects, so that the suites' assertions are rewritten."""
    import pytest

    from .testing.conformance import CommitterConformance
    from .testing.stores import StoreContract

    run = _RUN
    if run is None:
        raise RuntimeError("outcommit.checksuites.suite_classes runs inside run_suites only")

    def value(name: str, result: Any) -> Any:
        return pytest.fixture(name=name)(lambda self: result)

    classes: dict[str, type] = {"TestStoreContract": type("TestStoreContract", (StoreContract,), {
        "store_root": value("store_root", f"{run.root}/store-contract"),
        "config": value("config", dict(run.config))})}
    registry = get_registry()
    for name in run.committers:
        fault, publish = _conformance_faults(name, registry.committer_spec(name).requires)
        classes[f"TestConformance_{name}"] = type(f"TestConformance_{name}", (CommitterConformance,), {
            "job_commit_fault": fault, "task_publish_operation": publish,
            "committer_name": value("committer_name", name),
            "destination_root": value("destination_root", f"{run.root}/{name}"),
            # The suite compares file names: the staging committers' job id in them is off.
            "config": value("config", {**run.config, "outcommit.committer.unique-filenames": "false"})})
    return classes


__all__ = ["Suites", "run_suites", "suite_classes", "suites_to_run"]
