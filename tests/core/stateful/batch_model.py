"""The reference model of the batch protocol's stateful test: what must be visible.

Small on purpose: the machine (``batch_machine.py``) drives the real committers on a real
store and keeps, beside them, this model of every visible data file under the example's
root (what a reader following Spark's rule sees: ``outcommit.paths.hidden_from_readers``).

Each path maps to the set of contents it may hold, ``None`` meaning absent. A path is
certain when its set has one member; it becomes uncertain only where the protocol allows
more than one outcome (a job commit interrupted midway, a ``replace`` that deleted part
of the old data before its driver died, an aborted ``v2`` job's published attempt). A
path the model does not know may not exist at all: that is how an uncommitted attempt's
file, a zombie's late output or a file written outside the destinations is caught.

:class:`Traits` is what the model knows of each committer: the capabilities it declares
(read from the committer, so a new promise is checked against its declaration) and where
its conflict mode acts (job setup or job commit; the destination or the partitions
written).
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

Contents = bytes | None  # None: the path is absent

#: Destinations, relative to the example's root: adjacent (``dataset1``/``dataset10``: a
#: prefix of the other's name) and nested (``dataset1/nested`` inside ``dataset1``).
DESTINATIONS = ("out/dataset1", "out/dataset10", "out/dataset1/nested")
#: Data the destinations may hold before any job (chosen per example).
SEEDS = ("out/dataset1/old-1.txt", "out/dataset1/p=0/old-p0.txt", "out/dataset10/old-10.txt",
         "out/dataset1/nested/old-n.txt")
#: Files outside every destination that no job may touch: a parent's file, a sibling
#: whose name has a destination's as a prefix, a hidden file next to them.
CANARIES = {"out/canary.txt": b"canary\n", "out/dataset1.bak/keep.txt": b"backup\n"}
HIDDEN_CANARY = ("out/_canary/hidden.json", b'{"hidden": true}')
#: A pending upload beside the destinations (stores with multipart uploads): no sweep may abort it.
PENDING_CANARY = "out/dataset1.bak/pending.bin"

CONFLICT_MODES = ("fail", "append", "replace")


@dataclass(frozen=True)
class Traits:
    """What the model knows of one committer (docs/protocol.md, docs/reliability.md)."""

    name: str
    #: Any attempt may commit without asking the driver (``task-commit.isolated``).
    isolated: bool
    #: A task commit may be repeated, or another attempt committed (``task-commit.repeatable``).
    repeatable_task: bool
    #: A new job attempt recovers committed tasks (``job.recoverable``).
    recoverable: bool
    #: Nothing is visible before job commit (``output.invisible-until-job-commit``).
    invisible: bool
    #: Conflict mode ``fail`` is checked at job setup / at job commit.
    fail_at_setup: bool
    fail_at_commit: bool
    #: Conflict mode ``replace`` deletes at "setup" (v2: tasks publish as they commit) or "commit".
    replace_at: str
    #: The conflict mode's scope: "destination", or "partitions" (the directories written).
    scope: str
    #: A delayed-completion committer (pending uploads; ``allow_task_commit``).
    delayed: bool
    #: Conflict mode ``fail`` is also checked by each task commit, for its own partitions.
    fail_at_task_commit: bool = False


TRAITS = {
    "v1": Traits("v1", isolated=False, repeatable_task=True, recoverable=True, invisible=True,
                 fail_at_setup=True, fail_at_commit=True, replace_at="commit",
                 scope="destination", delayed=False),
    "v2": Traits("v2", isolated=False, repeatable_task=False, recoverable=False, invisible=False,
                 fail_at_setup=True, fail_at_commit=False, replace_at="setup",
                 scope="destination", delayed=False),
    "manifest": Traits("manifest", isolated=True, repeatable_task=True, recoverable=True,
                       invisible=True, fail_at_setup=True, fail_at_commit=True,
                       replace_at="commit", scope="destination", delayed=False),
    "directory": Traits("directory", isolated=True, repeatable_task=True, recoverable=True,
                        invisible=True, fail_at_setup=True, fail_at_commit=True,
                        replace_at="commit", scope="destination", delayed=True),
    "magic": Traits("magic", isolated=True, repeatable_task=True, recoverable=True, invisible=True,
                    fail_at_setup=True, fail_at_commit=True, replace_at="commit",
                    scope="destination", delayed=True),
    # core's magic on memmp://: the same family, S3's multipart semantics in this process
    "memmp-magic": Traits("memmp-magic", isolated=True, repeatable_task=True, recoverable=True,
                          invisible=True, fail_at_setup=True, fail_at_commit=True,
                          replace_at="commit", scope="destination", delayed=True),
    "blocklist": Traits("blocklist", isolated=True, repeatable_task=True, recoverable=True,
                        invisible=True, fail_at_setup=True, fail_at_commit=True,
                        replace_at="commit", scope="destination", delayed=True),
    "partitioned": Traits("partitioned", isolated=True, repeatable_task=True, recoverable=True,
                          invisible=True, fail_at_setup=False, fail_at_commit=True,
                          replace_at="commit", scope="partitions", delayed=True,
                          fail_at_task_commit=True),
}


def task_names(job_id: str, index: int, count: int) -> list[str]:
    """The destination-relative names every attempt of a task writes: the job id in each
    (as Spark's writers put it: no two jobs write one name), even ones at the top level,
    odd ones in the partition ``p=<index % 2>``."""
    return [f"part-{job_id}-{index}-{k}.txt" if k % 2 == 0 else
            f"p={index % 2}/part-{job_id}-{index}-{k}.txt" for k in range(count)]


def attempt_bytes(job_id: str, job_attempt: int, index: int, attempt: int, k: int) -> bytes:
    """What one attempt writes in its k-th file: its own bytes, so any mix-up shows."""
    return f"{job_id}.{job_attempt} task {index} attempt {attempt} file {k}\n".encode()


def inside(path: str, dest: str) -> bool:
    return path.startswith(dest.rstrip("/") + "/")


def partition_of(relative: str) -> str:
    """The partition directory of a destination-relative file ('' for the top level)."""
    return posixpath.dirname(relative)


@dataclass
class World:
    """Every visible data file under the root: path -> the contents it may hold."""

    paths: dict[str, set[Contents]] = field(default_factory=dict)

    def allowed(self, path: str) -> set[Contents]:
        return self.paths.get(path, {None})

    def put(self, path: str, data: bytes) -> None:
        self.paths[path] = {data}

    def maybe_put(self, path: str, data: bytes) -> None:
        self.paths[path] = self.allowed(path) | {data}

    def delete(self, path: str) -> None:
        self.paths[path] = {None}

    def maybe_delete(self, path: str) -> None:
        self.paths[path] = self.allowed(path) | {None}

    def present(self, paths: Iterable[str]) -> dict[str, set[Contents]]:
        """The paths among ``paths`` that may hold data."""
        return {p: self.paths[p] for p in paths if p in self.paths and self.paths[p] != {None}}

    def under(self, dest: str) -> list[str]:
        return [p for p in self.paths if inside(p, dest)]

    def in_scope(self, dest: str, scope: str, partitions: Iterable[str]) -> list[str]:
        """The known paths a conflict mode acts on: the whole destination, or the partitions
        written ('' is the destination's top-level files only)."""
        if scope == "destination":
            return self.under(dest)
        chosen = set(partitions)
        found = []
        for path in self.under(dest):
            relative = path[len(dest) + 1:]
            part = partition_of(relative)
            if part in chosen or any(p and relative.startswith(p + "/") for p in chosen):
                found.append(path)
        return found

    def holds_data(self, paths: Iterable[str]) -> bool | None:
        """True: some path surely holds data; False: none can; None: it depends."""
        maybe = False
        for path in paths:
            allowed = self.allowed(path)
            if None not in allowed:
                return True
            maybe = maybe or len(allowed) > 1
        return None if maybe else False

    def certain(self, paths: Iterable[str]) -> bool:
        return all(len(self.allowed(p)) == 1 for p in paths)

    def expected(self) -> dict[str, bytes]:
        """The certain data files (valid when every path is certain)."""
        return {p: next(iter(v)) for p, v in self.paths.items()  # type: ignore[misc]
                if len(v) == 1 and None not in v}

    def violations(self, actual: Mapping[str, bytes]) -> list[str]:
        """What in ``actual`` (the visible files) the model does not allow."""
        problems = []
        for path in sorted(set(self.paths) | set(actual)):
            got = actual.get(path)
            allowed = self.allowed(path)
            if got not in allowed:
                want = " or ".join("absent" if v is None else repr(v) for v in
                                   sorted(allowed, key=lambda v: b"" if v is None else v))
                problems.append(f"{path}: {'absent' if got is None else repr(got)}, expected {want}")
        return problems
