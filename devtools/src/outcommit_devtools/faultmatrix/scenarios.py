"""The failure points of the matrix, as data.

Five families, one frozen dataclass each; a scenario's ``id`` is its row in the table:

* :class:`TaskFailure` — attempt 0 of task 0 dies (before writing, mid-write, after
  writing, during its task commit after the k-th store operation, after committing with
  its message lost) or turns zombie (keeps writing and tries to commit late: before job
  commit, after it, or closing a file just as job commit starts removing its temporary
  state); the engine runs a retry and commits the job. Under both engine models
  (:data:`FLOWS`).
* :class:`DriverKill` — the driver process is killed with SIGKILL before job commit,
  after the k-th publishing operation of job commit, after publishing but before
  ``_SUCCESS``, or right after ``_SUCCESS`` (deleting the job's state); then the same job
  attempt commits again, a new job attempt recovers, or the job is aborted; under every
  conflict mode. The full size also kills it after the k-th store operation of any kind
  (``operation@k``, conflict mode ``append``): every window of job commit.
* :class:`StoreFault` — one request kind of the store fails at the HTTP layer (through
  the fault proxy) or a rename raises after it happened (the store wrapper).
* :class:`JobsLayout` — several jobs at once: same destination, adjacent, nested, at
  the bucket root, and conflict mode ``fail`` against existing data.
* :class:`HostileNames` — the destination and every file a job writes are named with
  glob characters, Unicode (composed, beside its decomposed twin) or characters URLs
  quote; decoys a glob, a normalisation or an unquoting of those names would reach lie
  in the destination and beside it: a store that reads a name as a pattern or a URL
  deletes, misses or leaks something the oracles see.

``matrix_scenarios(size)`` lists them; ``ci`` is the subset the test suite runs (and on
the network stores without the rows :func:`store_independent` names).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Flow = Literal["spark", "hadoop"]
Mode = Literal["fail", "append", "replace"]
Size = Literal["ci", "full"]

FLOWS: tuple[Flow, ...] = ("spark", "hadoop")
MODES: tuple[Mode, ...] = ("fail", "append", "replace")
SIZES: tuple[Size, ...] = ("ci", "full")

TaskPoint = Literal["before-write", "mid-write", "after-write", "during-commit", "after-commit",
                    "zombie-before-job-commit", "zombie-during-job-cleanup", "zombie-after-job-commit"]
DriverPoint = Literal["before-commit", "publish", "before-success", "after-success", "operation"]
Recovery = Literal["recommit", "recover", "abort", "abort-again", "abort-killed",
                   "abort-killed-recover"]
Phase = Literal["tasks", "task-commit", "job-commit"]
Layout = Literal["same-destination", "adjacent", "nested-parent-first", "nested-child-first",
                 "bucket-root", "fail-refuses-existing"]


@dataclass(frozen=True)
class TaskFailure:
    """Attempt 0 of task 0 fails at ``point`` (``k``: store operations of its commit first)."""

    point: TaskPoint
    flow: Flow
    k: int = 0

    family = "task"

    @property
    def id(self) -> str:
        at = f"@{self.k}" if self.point == "during-commit" else ""
        return f"task/{self.point}{at}/{self.flow}"


@dataclass(frozen=True)
class DriverKill:
    """The driver dies at ``point`` (``k``: publishing, or for ``operation`` any store,
    operations first), then ``then``."""

    point: DriverPoint
    then: Recovery
    mode: Mode
    k: int = 0

    family = "driver"

    @property
    def id(self) -> str:
        at = f"@{self.k}" if self.point in ("publish", "operation") else ""
        return f"driver/{self.point}{at}/{self.then}/{self.mode}"


@dataclass(frozen=True)
class StoreFault:
    """Requests of kind ``target`` on ``store`` meet ``fault`` ``times`` times (-1: always).

    ``store`` is a binding name, or ``rename`` for the store wrapper's rename faults on
    every store where the committer renames.
    """

    store: str
    target: str
    fault: str
    phase: Phase
    times: int = 1

    family = "store"

    @property
    def sustained(self) -> bool:
        return self.times < 0

    @property
    def id(self) -> str:
        count = "always" if self.times < 0 else f"x{self.times}"
        return f"store/{self.store}/{self.target}/{self.fault}-{count}"


@dataclass(frozen=True)
class JobsLayout:
    """Two jobs whose destinations relate as ``layout`` (or conflict mode ``fail``)."""

    layout: Layout

    family = "jobs"

    @property
    def id(self) -> str:
        return f"jobs/{self.layout}"


NameKind = Literal["glob", "unicode", "quoting"]
NAME_KINDS: tuple[NameKind, ...] = ("glob", "unicode", "quoting")


@dataclass(frozen=True)
class HostileNames:
    """A job whose destination and files are named ``kind`` (``families.NAMES``) commits
    in conflict mode ``mode``, decoys of every name in and beside the destination."""

    kind: NameKind
    mode: Mode

    family = "names"

    @property
    def id(self) -> str:
        return f"names/{self.kind}/{self.mode}"


Scenario = TaskFailure | DriverKill | StoreFault | JobsLayout | HostileNames


def task_scenarios(size: Size) -> list[TaskFailure]:
    ks = (1,) if size == "ci" else (1, 2, 3, 4, 5)
    found: list[TaskFailure] = []
    before: tuple[TaskPoint, ...] = ("before-write", "mid-write", "after-write")
    after: tuple[TaskPoint, ...] = ("after-commit", "zombie-before-job-commit",
                                    "zombie-during-job-cleanup", "zombie-after-job-commit")
    for flow in FLOWS:
        found += [TaskFailure(point, flow) for point in before]
        found += [TaskFailure("during-commit", flow, k) for k in ks]
        found += [TaskFailure(point, flow) for point in after]
    return found


#: The full size kills a driver after each of the first OPERATIONS store operations of its
#: job commit (the longest here, v1's with discovery, makes fewer).
OPERATIONS = 30


def driver_scenarios(size: Size) -> list[DriverKill]:
    """Full: every point x recovery x mode. CI: every point x recovery in ``append``, and
    the modes that change the outcome (``fail``: a restarted job meets its own output;
    ``replace``: old data deleted, new half published) where the job is half published
    (k = 1), wholly published without ``_SUCCESS``, and committed but not cleaned up."""
    ks = (1, 2) if size == "ci" else (1, 2, 3)
    points: list[tuple[DriverPoint, int]] = [("before-commit", 0), *(("publish", k) for k in ks),
                                             ("before-success", 0), ("after-success", 0)]
    recoveries: tuple[Recovery, ...] = ("recommit", "recover", "abort")
    found = []
    for mode in MODES:
        for point, k in points:
            if size == "ci" and mode != "append" and (point, k) not in (
                    ("publish", 1), ("before-success", 0), ("after-success", 0)):
                continue
            found += [DriverKill(point, then, mode, k) for then in recoveries]
            # An abort that cannot undo the commit must keep its evidence for the next one,
            # and one that dies midway must still stop a later commit of the job: where a
            # commit began (CI: half and wholly published, in append).
            if size == "full" or (mode == "append" and (point, k) in (("publish", 1),
                                                                      ("before-success", 0))):
                found.append(DriverKill(point, "abort-again", mode, k))
                # An abort that dies midway is final: the job attempt is never committed
                # after it, and a later attempt never reports what it removed.
                found.append(DriverKill(point, "abort-killed", mode, k))
                found.append(DriverKill(point, "abort-killed-recover", mode, k))
    if size == "full":  # every window of job commit, not only the publishing ones
        found += [DriverKill("operation", then, "append", k) for k in range(1, OPERATIONS + 1)
                  for then in recoveries]
    return found


# (store, target, fault, phase, times); what each target and fault means per store is in
# ``storefaults.py``. Phase ``tasks`` is every task's setup, writes and commit.
_STORE_FAULTS_CI: tuple[tuple[str, str, str, Phase, int], ...] = (
    ("s3", "complete", "throttle-503", "job-commit", 2),
    ("s3", "complete", "throttle-503", "job-commit", -1),
    ("s3", "complete", "throttle-429", "job-commit", 2),
    ("s3", "complete", "reset", "job-commit", 1),
    ("s3", "complete", "server-timeout", "job-commit", 1),
    ("s3", "complete", "client-timeout", "job-commit", 1),
    ("s3", "complete", "ambiguous", "job-commit", 1),
    ("s3", "upload-part", "throttle-503", "tasks", 2),
    ("s3", "upload-part", "ambiguous", "tasks", 1),
    ("s3", "pendingset-put", "ambiguous", "task-commit", 1),
    ("s3", "list", "reset", "job-commit", 1),
    ("gcs", "rewrite", "ambiguous", "job-commit", 1),
    ("gcs", "rewrite", "throttle-429", "job-commit", 2),
    ("rename", "job-rename", "ambiguous", "job-commit", 1),
    ("rename", "task-rename", "ambiguous", "task-commit", 1),
    ("rename", "job-rename", "refused", "job-commit", -1),
)
# Full size only: each HTTP fault on Azure costs 1.5-3 minutes (the Azure SDK's default
# retry policy waits 15 s and more between attempts), sustained throttling on GCS about 3
# (gcsfs backs off up to 32 s per request, the manifest committer retries each rename).
_STORE_FAULTS_FULL_ONLY: tuple[tuple[str, str, str, Phase, int], ...] = (
    ("azure", "copy", "ambiguous", "job-commit", 1),
    ("azure", "copy", "throttle-503", "job-commit", 1),
    ("gcs", "rewrite", "throttle-429", "job-commit", -1),
    ("s3", "complete", "throttle-429", "job-commit", -1),
    ("s3", "complete", "reset", "job-commit", -1),
    ("s3", "initiate", "throttle-503", "tasks", 2),
    ("s3", "initiate", "ambiguous", "tasks", 1),
    ("s3", "upload-part", "reset", "tasks", 1),
    ("s3", "upload-part", "client-timeout", "tasks", 1),
    ("s3", "complete", "client-timeout", "job-commit", -1),
    ("s3", "pendingset-put", "throttle-503", "task-commit", 2),
    ("s3", "delete-objects", "ambiguous", "job-commit", 1),
    ("s3", "list", "throttle-503", "job-commit", 2),
    ("azure", "copy", "reset", "job-commit", 1),
    ("azure", "put-blob", "ambiguous", "task-commit", 1),
    ("azure", "list", "throttle-503", "job-commit", 1),
    ("azure", "block-list", "ambiguous", "job-commit", 1),
    ("azure", "block-list", "throttle-503", "job-commit", 1),
    ("gcs", "rewrite", "reset", "job-commit", 1),
    ("gcs", "upload", "ambiguous", "task-commit", 1),
    ("gcs", "list", "throttle-429", "job-commit", 2),
)


def store_scenarios(size: Size) -> list[StoreFault]:
    rows = _STORE_FAULTS_CI + (_STORE_FAULTS_FULL_ONLY if size == "full" else ())
    return [StoreFault(store, target, fault, phase, times) for store, target, fault, phase, times in rows]


def jobs_scenarios(size: Size) -> list[JobsLayout]:
    return [JobsLayout(layout) for layout in ("same-destination", "adjacent", "nested-parent-first",
                                              "nested-child-first", "bucket-root",
                                              "fail-refuses-existing")]


def name_scenarios(size: Size) -> list[HostileNames]:
    """Every kind of name in ``append`` (a job replacing files it writes again: ``v2``
    deletes each first) and ``replace`` (the old files deleted by name)."""
    return [HostileNames(kind, mode) for kind in NAME_KINDS for mode in ("append", "replace")]


def store_independent(scenario: Scenario) -> bool:
    """Rows whose outcome follows from the committer's logic alone, not from how the store
    renames, lists or completes: the CI size runs them on ``file`` and ``memory`` only
    (the full size everywhere). Hadoop-flow task deaths outside task commit (the flows
    differ only in who commits), a driver killed before job commit began (nothing of it
    reached the store), and kills after the second publishing operation (the first one
    already shows what a half-published job leaves)."""
    if isinstance(scenario, TaskFailure):
        return scenario.flow == "hadoop" and scenario.point not in ("during-commit", "after-commit")
    if isinstance(scenario, DriverKill):
        return scenario.point == "before-commit" or (scenario.point == "publish" and scenario.k > 1)
    return False


def matrix_scenarios(size: Size) -> list[Scenario]:
    """Every scenario of the matrix of this size, in table order."""
    if size not in SIZES:
        raise ValueError(f"size must be one of {', '.join(SIZES)}, not {size!r}")
    return [*task_scenarios(size), *driver_scenarios(size), *store_scenarios(size),
            *jobs_scenarios(size), *name_scenarios(size)]
