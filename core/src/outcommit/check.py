"""``outcommit check URL``: is this store ready for a job, before one runs?

One line per check, in the order a job meets them: the store's plugin, its endpoint
(reached, timed), the credentials and the bucket or container (one listing of the
destination), writing, each capability that decides the committer (probed where a few
requests prove it, under ``<URL>/_outcommit_check_<uuid>/``, which is removed after;
declared otherwise), and the committer a job would get. A capability the store declares
but the probe refutes fails the check: a server that ignores ``If-None-Match`` (an older
S3-compatible one, an emulator) would let two task attempts both publish.

``--full`` runs the store contract and the committer conformance suites
(``outcommit.testing``) against the real store, under such a prefix too, as Hadoop's cloud
integration tests run against a real bucket: what no emulator here has (HDFS, Azure HNS,
GCS ``objects.move``, real S3's conditional writes) is proven where it exists.
"""

from __future__ import annotations

import contextlib
import io
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from . import capabilities as caps
from .errors import (
    OutcommitError,
    StoreCredentialsError,
    StoreNotFoundError,
    StorePermissionError,
    StoreUnreachableError,
)
from .extras import require
from .factory import create_committer, normalise_url, open_store, scheme_of
from .plugins import get_registry
from .store import Store, connect_once

PREFIX = "_outcommit_check_"
CONNECT_TIMEOUT = 5.0


@dataclass
class Line:
    """One check: what was checked, its result, what was found."""

    check: str
    result: str
    detail: str = ""
    ok: bool = True
    ms: int | None = None

    def text(self, width: int = 12, result_width: int = 4) -> str:
        timing = f"  ({self.ms} ms)" if self.ms is not None else ""
        return f"{self.check:<{width}} {self.result:<{result_width}} {self.detail}{timing}".rstrip()

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _ms(started: float) -> int:
    return round((time.monotonic() - started) * 1000)


def check(url: str, config: Mapping[str, Any]) -> list[Line]:
    """Every check of ``url`` with ``config``; stops where the next could only fail too."""
    try:
        url = normalise_url(url, get_registry().stores())
        store = open_store(url, config)
    except OutcommitError as exc:
        return [Line("store", "failed", str(exc), ok=False)]
    spec = get_registry().store_spec(store.scheme)
    lines = [Line("store", "ok", f"{type(store).__name__} (plugin {spec.plugin})")]
    try:
        if not _reach(store, lines) or not _access(store, url, lines):
            return lines
        dest = store.strip(url)
        base = store.join(dest, f"{PREFIX}{uuid.uuid4().hex[:12]}")
        kept = _first_existing(store, dest)
        try:
            lines += _probes(store, base)
        finally:
            remove(store, base)
            _remove_made(store, dest, kept)
        lines.append(_committer(url, config, store))
        return lines
    finally:
        store.close()


def _first_existing(store: Store, path: str) -> str:
    """``path`` or its nearest ancestor that exists (directories the probes make below it
    are removed after, where a store has directories)."""
    while path.strip("/") and not store.exists(path):
        path = path.rpartition("/")[0] or "/"
    return path


def _remove_made(store: Store, path: str, kept: str) -> None:
    """Remove the empty directories the probes made, from ``path`` up to ``kept``."""
    try:
        while path != kept and path.strip("/"):
            store.delete_empty_dir(path)
            path = path.rpartition("/")[0] or "/"
    except OSError:
        pass  # not empty: something else is there now


def _reach(store: Store, lines: list[Line]) -> bool:
    """The endpoint line: one TCP connection, timed (a store with no service: nothing to reach)."""
    started = time.monotonic()
    try:
        endpoint = store.service_endpoint()
        if endpoint is None:
            lines.append(Line("endpoint", "n/a", "no network service (local)"))
            return True
        connect_once(endpoint, CONNECT_TIMEOUT)
    except StoreUnreachableError as exc:
        lines.append(Line("endpoint", "failed", str(exc), ok=False))
        return False
    except OSError as exc:
        lines.append(Line("endpoint", "failed", f"cannot reach {endpoint} ({type(exc).__name__}: "
                                                f"{exc}): check the store's endpoint setting", ok=False))
        return False
    lines.append(Line("endpoint", "ok", endpoint, ms=_ms(started)))
    return True


def _access(store: Store, url: str, lines: list[Line]) -> bool:
    """The credentials and bucket lines: a listing of the destination, then, on an object
    store (whose paths begin with the bucket), the bucket itself (a listing of a bucket that
    is not there answers nothing on some stores: GCS)."""
    authority = urlsplit(url).netloc
    what, where = ("bucket", f"{store.scheme}://{authority}") if authority else \
        ("destination", url)
    bucket = authority.split("@", 1)[0]
    started = time.monotonic()
    try:
        store.list_dir(store.strip(url))
        if bucket and store.strip(url).startswith(bucket) and store.info(bucket) is None:
            raise StoreNotFoundError(f"the bucket or container {where} does not exist: create it, "
                                     "or fix the destination URL")
    except StoreCredentialsError as exc:
        lines += [Line("credentials", "failed", str(exc), ok=False), Line(what, "skipped", where)]
        return False
    except StorePermissionError as exc:
        lines += [Line("credentials", "ok", "accepted"), Line(what, "denied", str(exc), ok=False)]
        return False
    except StoreNotFoundError as exc:
        lines += [Line("credentials", "unproven", "the service answered for a bucket that is not there"),
                  Line(what, "missing", str(exc), ok=False)]
        return False
    except StoreUnreachableError as exc:
        lines.append(Line("endpoint", "failed", str(exc), ok=False))
        return False
    except Exception as exc:  # another error of the store's: said as it is
        lines.append(Line(what, "failed", f"{where}: {type(exc).__name__}: {exc}", ok=False))
        return False
    lines += [Line("credentials", "ok", "accepted" if authority else "n/a (local)"),
              Line(what, "ok", where, ms=_ms(started))]
    return True


def _probe_exclusive(store: Store, base: str) -> tuple[bool, str]:
    path = store.join(base, "exclusive")
    store.create_exclusive(path, b"first")
    try:
        store.create_exclusive(path, b"second")
    except FileExistsError:
        return store.read_bytes(path) == b"first", "the refused create replaced the file"
    return False, "a second exclusive create of one name succeeded: the server does not enforce it"


def _probe_listing(store: Store, base: str) -> tuple[bool, str]:
    path = store.join(base, "listed")
    store.write_bytes(path, b"x")
    listed = [info.path for info in store.list_files(base)]
    return path in listed, "a file just written was not listed"


def _probe_etags(store: Store, base: str) -> tuple[bool, str]:
    path = store.join(base, "etag")
    store.write_bytes(path, b"x")
    info = store.info(path)
    return bool(info and info.etag), "a file just written has no etag"


def _probe_multipart(store: Store, base: str) -> tuple[bool, str]:
    uploads = store.multipart()
    if uploads is None:
        return False, "the store gives no multipart operations"
    path = store.join(base, "upload")
    upload_id = uploads.initiate(path)
    try:
        listed = any(u.upload_id == upload_id for u in uploads.list_pending(base + "/"))
    finally:
        uploads.abort(path, upload_id)
    return listed, "an upload just initiated was not listed as pending"


#: Capabilities a few requests prove (the others are taken as declared).
PROBES: dict[str, Callable[[Store, str], tuple[bool, str]]] = {
    caps.CREATE_EXCLUSIVE: _probe_exclusive,
    caps.LISTING_CONSISTENT: _probe_listing,
    caps.ETAGS_AVAILABLE: _probe_etags,
    caps.MULTIPART_DELAYED_COMPLETION: _probe_multipart,
}


def _probes(store: Store, base: str) -> list[Line]:
    """A write, then each capability: probed where declared and provable, else as declared."""
    path = store.join(base, "written")
    started = time.monotonic()
    try:
        store.write_bytes(path, b"outcommit check")
    except Exception as exc:
        return [Line("write", "failed", f"{store.url(path)}: {type(exc).__name__}: {exc}", ok=False)]
    lines = [Line("write", "ok", f"{store.url(base)}/ (removed after)", ms=_ms(started))]
    names = [*caps.STORE_CAPABILITIES,
             *sorted(set(store.capabilities.names) - set(caps.STORE_CAPABILITIES))]
    for name in names:
        declared = store.has_capability(name)
        probe = PROBES.get(name)
        if probe is None or not declared:
            lines.append(Line(f"capability {name}", "yes" if declared else "no", "(declared)"))
            continue
        try:
            found, why = probe(store, base)
        except Exception as exc:
            found, why = False, f"{type(exc).__name__}: {exc}"
        lines.append(Line(f"capability {name}", "yes", "(probed)") if found else
                     Line(f"capability {name}", "NO", f"(declared, but the probe found otherwise: {why})",
                          ok=False))
    return lines


def _committer(url: str, config: Mapping[str, Any], store: Store) -> Line:
    registry = get_registry()
    safe = sorted(n for n, s in registry.committers().items()
                  if s.safe_on(store, scheme_of(url)))
    try:
        committer = create_committer(url, config)
    except OutcommitError as exc:
        return Line("committer", "failed", f"{exc}", ok=False)
    return Line("committer", committer.name, f"{committer.selection}; safe here: {', '.join(safe)}")


def remove(store: Store, path: str) -> None:
    """Delete ``path`` and abort the uploads pending under it (never raises: a check's
    outcome stands; what is left is said)."""
    from .testing.roots import remove_tree

    remove_tree(store, path)


# -- --full: the suites against the real store --------------------------------------------------
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
    kept = _first_existing(store, store.strip(url))
    try:
        with tempfile.TemporaryDirectory(prefix="outcommit-check-") as tmp:
            ini, module = Path(tmp) / "pytest.ini", Path(tmp) / f"test_check_{uuid.uuid4().hex[:8]}.py"
            ini.write_text("[pytest]\nmarkers =\n    generative: hypothesis properties\n")
            module.write_text("from outcommit.check import suite_classes\n\n"
                              "globals().update(suite_classes())\n")
            with contextlib.redirect_stdout(output):
                pytest.main([str(module), "-q", "-p", "no:cacheprovider", "-c", str(ini),
                             "--rootdir", tmp, "-o", "addopts=", "-W", "ignore::DeprecationWarning"],
                            plugins=[outcome])
    finally:
        _RUN = None
        try:
            remove(store, store.strip(root))
            _remove_made(store, store.strip(url), kept)
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
        raise RuntimeError("outcommit.check.suite_classes runs inside run_suites only")

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


__all__ = ["PREFIX", "Line", "check", "run_suites", "suites_to_run"]

