"""Plan the cells (committer x store x scenario) and run one: set up, act, observe, judge.

Committers are enumerated from the plugin registry, never listed here: a committer
registered tomorrow gets its column. A pairing the store's declared capabilities make
unsafe is one ``refused`` cell, verified by asking the factory.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from outcommit import capabilities as caps
from outcommit.capabilities import COMMITTER_CAPABILITIES
from outcommit.errors import UnsafeCommitterError
from outcommit.factory import create_committer, open_store
from outcommit.plugins import get_registry
from outcommit.store import Store

from . import families
from .bindings import NETWORK_STORES, STORES, Binding
from .engine import CONFLICT_MODE_KEY, CellEnv, HarnessError
from .expectations import expect
from .oracles import Observation, Verdict, error_text, fingerprint_outside, judge, leftovers, read_success
from .scenarios import (
    DriverKill,
    HostileNames,
    JobsLayout,
    Scenario,
    Size,
    StoreFault,
    TaskFailure,
    matrix_scenarios,
    store_independent,
)
from .storefaults import fault_config

#: URL scheme of each binding (what the factory decides on).
SCHEMES: Mapping[str, str] = {"file": "file", "memory": "memory", "memmp": "memmp", "s3": "s3",
                              "azure": "abfs", "gcs": "gs"}

# Outside every destination: a canary next to it, one in a sibling sharing its prefix
# (dataset1 / dataset1.bak, dataset10) and pending uploads there where the store has them.
CANARIES = {"canary.txt": b"canary in the parent directory\n",
            "dataset10/part-00000-0.txt": b"adjacent dataset10, a name the job also writes\n",
            "dataset1.bak/keep.txt": b"sibling sharing the prefix dataset1\n"}
PENDING_CANARIES = ("inflight.bin", "dataset10/inflight.bin")
WORKERS = 6  # threads running cells (most of their time is spent waiting on servers)
SWITCH_INTERVAL = 0.0005  # seconds: the interpreter's switch interval while cells run (run_many)


@dataclass(frozen=True)
class Cell:
    """One cell: a store binding, a committer and a scenario (None: the pairing itself)."""

    store: str
    committer: str
    scenario: Scenario | None

    @property
    def row(self) -> str:
        return self.scenario.id if self.scenario is not None else "factory"

    @property
    def column(self) -> str:
        return f"{self.store} {self.committer}"

    @property
    def id(self) -> str:
        return f"{self.store}-{self.committer}-{self.row}"


@dataclass(frozen=True)
class CellResult:
    cell: Cell
    verdict: Verdict
    seconds: float


def missing_capabilities(store: str, committer: str) -> list[str]:
    """What the store declares it lacks for the committer (the factory's refusal, predicted)."""
    registry = get_registry()
    return registry.store_spec(SCHEMES[store]).capabilities.missing(
        registry.committer_spec(committer).requires)


def made_elsewhere(store: str, committer: str) -> bool:
    """Is the committer made only for other stores (``CommitterSpec.made_for``)? The
    factory refuses it there first, whatever the store's capabilities (S3's ``magic`` on
    ``memmp://``, which declares all it requires, or ``memmp-magic`` on ``s3://``)."""
    made_for = get_registry().committer_spec(committer).made_for
    return bool(made_for) and SCHEMES[store] not in made_for


def refused(store: str, committer: str) -> bool:
    """Does the factory refuse the pairing (one ``refused`` cell, no scenarios)?"""
    return made_elsewhere(store, committer) or bool(missing_capabilities(store, committer))


def plan(size: Size, stores: Sequence[str] = STORES,
         committers: Sequence[str] | None = None) -> list[Cell]:
    """Every cell of the matrix, grouped by store and committer."""
    names = list(committers) if committers else _bound_committers(stores)
    unknown = sorted(set(names) - set(get_registry().committers()))
    if unknown:
        raise ValueError(f"unknown committers: {', '.join(unknown)}")
    scenarios = matrix_scenarios(size)
    cells: list[Cell] = []
    for store in stores:
        for name in names:
            if refused(store, name):
                cells.append(Cell(store, name, None))
                continue
            cells += [Cell(store, name, s) for s in scenarios if _applies(s, store)
                      and not (size == "ci" and store in NETWORK_STORES and store_independent(s))]
    return cells


def _bound_committers(stores: Sequence[str]) -> list[str]:
    """Every registered committer but those made only for stores outside this run
    (``CommitterSpec.made_for``: S3's committers in a run without ``s3``); in a run with
    their store, they are refused cells on every other store."""
    ours = {SCHEMES[store] for store in stores}
    return sorted(name for name, spec in get_registry().committers().items()
                  if not spec.made_for or ours & set(spec.made_for))


def _applies(scenario: Scenario, store: str) -> bool:
    """HTTP faults belong to their store; rename faults to stores whose committers rename
    (those declaring atomic file rename: on S3 no accepted committer renames)."""
    if not isinstance(scenario, StoreFault):
        return True
    if scenario.store == "rename":
        declared = get_registry().store_spec(SCHEMES[store]).capabilities
        return declared.has_capability(caps.RENAME_FILE_ATOMIC)
    return scenario.store == store


def uses_proxy(cell: Cell) -> bool:
    """Does the cell inject HTTP faults (through its binding's proxy)? Only those cells
    go through the proxy: relaying costs the matrix's process CPU."""
    return isinstance(cell.scenario, StoreFault) and cell.scenario.store != "rename"


def cell_mode(scenario: Scenario) -> str:
    if isinstance(scenario, (DriverKill, HostileNames)):
        return scenario.mode
    if isinstance(scenario, JobsLayout) and scenario.layout == "fail-refuses-existing":
        return "fail"
    return "append"


class Matrix:
    """Runs cells against the bindings ``binding(name)`` returns (opened on first use)."""

    def __init__(self, binding: Callable[[str], Binding], scratch: str) -> None:
        self.binding = binding
        self.scratch = scratch

    def run_many(self, cells: Sequence[Cell],
                 progress: Callable[[CellResult], None] | None = None) -> list[CellResult]:
        """Run ``cells`` in :data:`WORKERS` threads; results in the order of ``cells``.

        On a network store, cells share nothing but the binding's fault proxy: the cells
        with HTTP faults run one after the other (a fault is a rule of that proxy), the
        others reach the server directly, one group per committer (and its name rows). The cells of ``file``
        run one after the other, and those of ``memory`` and ``memmp`` too: they share the
        top level the oracles check (and fsspec's memory filesystem is one dictionary, both
        bindings' files).
        """
        for store in dict.fromkeys(cell.store for cell in cells):
            self.binding(store)  # opened here, not concurrently in the workers
        groups: dict[tuple[str, str, bool], list[Cell]] = {}
        for cell in cells:
            apart = self.binding(cell.store).proxy is not None and not uses_proxy(cell)
            # The name rows of a network store are a group of their own: after the other
            # rows of their committer they would lengthen its chain (GCS's: the longest).
            named = apart and isinstance(cell.scenario, HostileNames)
            # memory and memmp: one in-process memory filesystem, one group
            place = "in-process" if not self.binding(cell.store).separate_processes else cell.store
            groups.setdefault((place, cell.committer if apart else "", named), []).append(cell)
        # HTTP-fault groups first (their cells wait out the clients' backoff, one after the
        # other), then the longest groups.
        ordered = dict(sorted(groups.items(),
                              key=lambda item: (not uses_proxy(item[1][0]), -len(item[1]))))
        done: dict[Cell, CellResult] = {}
        lock = threading.Lock()
        stopping = threading.Event()

        def work(group: list[Cell]) -> None:
            for cell in group:
                if stopping.is_set():
                    return
                result = self.run(cell)
                with lock:
                    done[cell] = result
                    if progress is not None:
                        progress(result)

        # The workers and the proxies mostly wait on sockets: with the default 5 ms switch
        # interval each woken thread waits that long for the interpreter lock behind a
        # busy one, on every request. Restored afterwards (it is process-wide).
        interval = sys.getswitchinterval()
        sys.setswitchinterval(min(interval, SWITCH_INTERVAL))
        pool = ThreadPoolExecutor(max_workers=min(len(ordered), WORKERS) or 1,
                                  thread_name_prefix="faultmatrix")
        try:
            for future in [pool.submit(work, group) for group in ordered.values()]:
                future.result()
        except BaseException:
            stopping.set()  # interrupted: the workers stop after their current cell
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
            sys.setswitchinterval(interval)
        return [done[cell] for cell in cells]

    def run(self, cell: Cell) -> CellResult:
        started = time.monotonic()
        try:
            verdict = self._refusal(cell) if cell.scenario is None else self._scenario(cell, cell.scenario)
        except Exception as exc:
            frames = "".join(traceback.format_exception(exc)[-6:])
            verdict = Verdict("WRONG", f"harness error: {error_text(exc)}\n{frames}")
        return CellResult(cell, verdict, time.monotonic() - started)

    # -- refused pairings ------------------------------------------------------------------------
    def _refusal(self, cell: Cell) -> Verdict:
        binding = self.binding(cell.store)
        elsewhere = made_elsewhere(cell.store, cell.committer)
        # The factory checks what a committer is made for first: no capability is missing then.
        predicted = [] if elsewhere else missing_capabilities(cell.store, cell.committer)
        made_for = get_registry().committer_spec(cell.committer).made_for
        why = (f"made for {', '.join(f'{s}://' for s in made_for)} only"
               if elsewhere else f"lacks {', '.join(predicted)}")
        try:
            create_committer(f"{binding.root}/refused", binding.config, cell.committer)
        except UnsafeCommitterError as exc:
            if exc.missing != predicted:
                return Verdict("WRONG", f"refused for {exc.missing}, but predicted: {why}")
            return Verdict("refused", f"{why}; safe: {', '.join(exc.safe)}")
        return Verdict("WRONG", f"predicted a refusal ({why}) but the factory accepted the committer")

    # -- scenarios --------------------------------------------------------------------------------
    def _scenario(self, cell: Cell, scenario: Scenario) -> Verdict:
        binding = self.binding(cell.store)
        root = binding.cell_root(cell.row.replace("/", "-").replace("@", "at"))
        local_dir = os.path.join(self.scratch, f"staging-{uuid.uuid4().hex[:8]}")
        http_fault = uses_proxy(cell)
        base = binding.config if http_fault or not binding.direct_config else binding.direct_config
        config = {**base, CONFLICT_MODE_KEY: cell_mode(scenario),
                  # The matrix compares names: the staging committers' job-id suffix is off.
                  "outcommit.committer.unique-filenames": "false",
                  "outcommit.s3.staging.tmp-dir": local_dir,
                  **(fault_config(scenario) if isinstance(scenario, StoreFault) else {}),
                  # The job writes files again over older versions: manifest replaces them
                  # (its default refuses), so it deletes by those names too.
                  **({"outcommit.manifest.delete-target-files": "true"}
                     if isinstance(scenario, HostileNames) else {})}
        name = families.destination_name(scenario.kind) if isinstance(scenario, HostileNames) \
            else "dataset1"
        dest = f"{root}/{name}"
        store = open_store(dest, config)
        env = CellEnv(binding, cell.committer, root, dest, config, store, local_dir)
        if isinstance(scenario, HostileNames):
            env.rename = families.renamer(scenario.kind)
        proxy = binding.proxy if http_fault else None
        if proxy is not None:
            proxy.upstream_errors.clear()
        try:
            verdict = self._observe(env, scenario)
            if proxy is not None and proxy.upstream_errors:
                # The proxy failed by itself (not an injected fault): the cell proves nothing.
                return Verdict("WRONG", "harness error: the fault proxy failed on its own: "
                                        + "; ".join(proxy.upstream_errors[:3]))
            return verdict
        finally:
            env.bury()
            _remove(store, [root, *env.extra_roots])
            store.close()

    def _observe(self, env: CellEnv, scenario: Scenario) -> Verdict:
        store = env.store
        seed(store, env.root, CANARIES)
        if isinstance(scenario, HostileNames):
            seed(store, env.root, families.beside_destination(scenario.kind))
        pending = seed_pending(store, env.root)
        try:
            return self._act_and_judge(env, scenario)
        finally:
            _abort_uploads(store, pending)

    def _act_and_judge(self, env: CellEnv, scenario: Scenario) -> Verdict:
        real = env.store
        if isinstance(scenario, HostileNames):
            env.existing = families.existing_names(scenario.kind)
            seed(real, env.dest, env.existing)
        elif env.mode != "fail" or isinstance(scenario, JobsLayout):
            env.existing = dict(families.EXISTING)
            seed(real, env.dest, env.existing)
        container = real.strip(env.binding.container)
        everything_before = fingerprint_outside(real, real.strip(env.root), container, [])
        try:
            obs = _run_family(env, scenario)
        except families.NotApplicable as reason:
            return Verdict("n/a", str(reason))
        except HarnessError as exc:
            return Verdict("WRONG", f"harness error: {exc}")
        env.store = real  # a rename fault wrapped it: the oracles read the store itself
        obs.written = env.written
        dests = [d.path for d in obs.dests]
        inside = [d.rstrip("/") + "/" for d in dests]
        obs.outside_before = {k: v for k, v in everything_before.items()
                              if not any((k.removeprefix("pending ") + "/").startswith(p) for p in inside)}
        obs.outside_after = fingerprint_outside(real, real.strip(env.root), container, dests)
        for index, d in enumerate(obs.dests):
            d.after = env.visible(d.url)
            d.leftovers = leftovers(real, d.path, [env.local_dir] if index == 0 else [])
            d.success = read_success(real, d.path)
        committer = env.make()
        has = {name: committer.has_capability(name) for name in COMMITTER_CAPABILITIES}
        return judge(obs, expect(scenario, committer.has_capability), has)


def _run_family(env: CellEnv, scenario: Scenario) -> Observation:
    if isinstance(scenario, TaskFailure):
        return families.task_failure(env, scenario)
    if isinstance(scenario, DriverKill):
        return families.driver_kill(env, scenario)
    if isinstance(scenario, StoreFault):
        return families.store_fault(env, scenario)
    if isinstance(scenario, HostileNames):
        return families.hostile_names(env, scenario)
    return families.jobs_layout(env, scenario)


def seed(store: Store, url_or_path: str, files: Mapping[str, bytes]) -> None:
    base = store.strip(url_or_path)
    for rel, data in files.items():
        store.write_bytes(store.join(base, rel), data)


def seed_pending(store: Store, root: str) -> list[tuple[str, str]]:
    """Pending uploads next to the destination (other writers'): no job may abort them."""
    multipart = store.multipart()
    if multipart is None:
        return []
    base = store.strip(root)
    return [(path, multipart.initiate(path)) for path in (store.join(base, p) for p in PENDING_CANARIES)]


def _abort_uploads(store: Store, uploads: Iterable[tuple[str, str]]) -> None:
    """Done after the fingerprint: the canaries' uploads must not outlive the cell."""
    multipart = store.multipart()
    if multipart is None:
        return
    for path, upload_id in uploads:
        try:
            multipart.abort(path, upload_id)
        except Exception:
            pass


def _remove(store: Store, urls: Iterable[str]) -> None:
    """Delete a finished cell's data (best effort: the verdict is already taken)."""
    real: Any = getattr(store, "inner", store)
    for url in urls:
        path = real.strip(url)
        try:
            multipart = real.multipart()
            if multipart is not None:
                for upload in multipart.list_pending(path.rstrip("/") + "/"):
                    multipart.abort(upload.path, upload.upload_id)
            if "/" in path.strip("/"):
                real.delete(path, recursive=True)
        except Exception:
            pass
