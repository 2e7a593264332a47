"""Test hooks in the executors' Python workers: hold one write mid-way; tell when workers are busy.

They run as the executors' pyspark daemon (``spark.python.daemon.module=
outcommit_devtools.sparkhooks``): this module sets them up, then runs pyspark's own daemon;
every Python worker it forks inherits them. Both are switched on by
``OUTCOMMIT_SPARK_HOOKS`` (a directory) in the executors' environment; see :func:`spark_conf`.

**Holding a write.** The data source writes a task's files one after another inside
``write()``; nothing public stops it half-way, so the hook stops it at the I/O boundary, as
a hung disk or network would. A rule (``holds/<name>.rule``) lists substrings; the first
write whose target contains all of them is held: a local file opened for writing (audit
event ``open``) or an HTTP request sent through ``http.client`` (``http.client.send``:
boto3, hence every S3 committer operation). The holding worker records its pid, parent
chain and executor JVM in ``holds/<name>.held`` (created exclusively: one holder per rule)
and waits until ``holds/<name>.release`` exists, its executor JVM is gone (it then exits,
as its daemon would make it) or the rule's deadline passes. Writes through aiohttp (s3fs,
adlfs) raise no audit event and cannot be held.

**Lining writes up.** A barrier (``holds/<name>.barrier``) holds the first matching write
of each worker until ``parties`` workers have reached one (each marks ``<name>.at.<pid>``):
two attempts of one task then write and commit side by side, from the same point.

**Busy workers.** Spark does not wait for the Python worker of a task it kills (a losing
speculative attempt, the tasks of a failed job): that worker may go on writing, and commit,
after the job has ended. Each worker marks ``busy/<pid>`` from the moment a task reaches it
until it is done with it, so a test can wait until no worker is busy before it judges the
destination.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .sparkcluster import ancestors, executor_of, running, wait_until

HOOKS_ENV = "OUTCOMMIT_SPARK_HOOKS"
HOOKS_CONF = f"spark.executorEnv.{HOOKS_ENV}"
DAEMON_MODULE = "outcommit_devtools.sparkhooks"
POLL_S = 0.05
BARRIER_POLL_S = 0.002  # the head start one party can get over the others
_HTTP_METHODS = (b"PUT ", b"POST ", b"GET ", b"HEAD ", b"DELETE ")


@dataclass(frozen=True)
class Rule:
    """Hold the first write whose target (path, or HTTP request line) contains every substring."""

    name: str
    contains: tuple[str, ...]
    deadline_s: float = 120.0


@dataclass(frozen=True)
class Barrier:
    """Hold each worker's first write matching every substring until ``parties`` workers have one."""

    name: str
    contains: tuple[str, ...]
    parties: int = 2
    deadline_s: float = 120.0


@dataclass(frozen=True)
class Held:
    """What the holding worker recorded: which write it holds, and who it is."""

    target: str
    pid: int
    ancestors: tuple[int, ...]
    executor_pid: int | None


def spark_conf(directory: Path) -> dict[str, str]:
    """Session config that installs the hooks in every executor's Python workers."""
    return {"spark.python.daemon.module": DAEMON_MODULE, HOOKS_CONF: str(directory)}


class Hooks:
    """The test's side of the hooks directory."""

    def __init__(self, directory: Path) -> None:
        self.holds = directory / "holds"
        self.busy = directory / "busy"
        self.holds.mkdir(parents=True, exist_ok=True)
        self.busy.mkdir(parents=True, exist_ok=True)

    @classmethod
    def of(cls, spark: Any) -> Hooks | None:
        """The hooks of a session started with :func:`spark_conf`, else None."""
        directory = spark.sparkContext.getConf().get(HOOKS_CONF)
        return cls(Path(directory)) if directory else None

    # -- holds -------------------------------------------------------------------------------
    def hold(self, rule: Rule) -> None:
        tmp = self.holds / f".{rule.name}.tmp"
        tmp.write_text(json.dumps({"contains": list(rule.contains), "deadline_s": rule.deadline_s}))
        tmp.rename(self.holds / f"{rule.name}.rule")  # workers never read half a rule

    def barrier(self, barrier: Barrier) -> None:
        tmp = self.holds / f".{barrier.name}.tmp"
        tmp.write_text(json.dumps({"contains": list(barrier.contains), "parties": barrier.parties,
                                   "deadline_s": barrier.deadline_s}))
        tmp.rename(self.holds / f"{barrier.name}.barrier")

    def arrived(self, name: str) -> list[int]:
        """Pids of the workers that reached barrier ``name``."""
        return sorted(int(p.name.rsplit(".", 1)[1]) for p in self.holds.glob(f"{name}.at.*"))

    def held(self, name: str) -> Held | None:
        """What holds rule ``name`` now, or None."""
        try:
            data = json.loads((self.holds / f"{name}.held").read_text())
        except (OSError, ValueError):
            return None  # not held yet (the marker appears by an atomic rename)
        return Held(data["target"], data["pid"], tuple(data["ancestors"]), data["executor_pid"])

    def wait_held(self, name: str, deadline_s: float = 120.0, unless: Any = None) -> Held | None:
        """Wait until a write matching rule ``name`` is held; None if ``unless()`` came true first."""
        result: Held | bool = wait_until(lambda: self.held(name) or bool(unless and unless()), deadline_s,
                                         f"a write matching rule {name!r} to be held")
        return result if isinstance(result, Held) else None

    def release(self, name: str) -> None:
        (self.holds / f"{name}.release").touch()

    def clear(self) -> None:
        """Release whatever is still held and remove every rule and marker."""
        for rule in self.holds.glob("*.rule"):
            self.release(rule.stem)
            rule.unlink()
        for leftover in [*self.holds.glob("*.held"), *self.holds.glob("*.release"),
                         *self.holds.glob("*.barrier"), *self.holds.glob("*.at.*")]:
            leftover.unlink(missing_ok=True)

    # -- busy workers ----------------------------------------------------------------------------
    def busy_workers(self) -> list[int]:
        """Pids of Python workers in the middle of a task (markers of dead workers are dropped)."""
        busy = []
        for marker in self.busy.iterdir():
            if marker.name.isdigit():
                if running(int(marker.name)):
                    busy.append(int(marker.name))
                else:
                    marker.unlink(missing_ok=True)  # killed with its executor, or destroyed by Spark
        return sorted(busy)

    def wait_idle(self, deadline_s: float = 150.0) -> None:
        wait_until(lambda: not self.busy_workers(), deadline_s,
                   "every executor's Python workers to finish their tasks", 0.1)


# -- the executors' side ------------------------------------------------------------------------
class _AuditHook:
    def __init__(self, holds: str) -> None:
        self.dir = holds
        self.local = threading.local()
        self.rules: dict[str, Rule | Barrier] = {}
        self.stamp: int | None = None
        self.passed: set[str] = set()  # barriers this process went through

    def _load(self) -> dict[str, Rule | Barrier]:
        # Runs on every file a worker opens, imports included: re-read the rules only when
        # the directory changed.
        try:
            stamp = os.stat(self.dir).st_mtime_ns
        except OSError:
            return {}
        if stamp != self.stamp:
            rules: dict[str, Rule | Barrier] = {}
            for entry in os.listdir(self.dir):
                name, _, kind = entry.rpartition(".")
                if kind not in ("rule", "barrier") or name.startswith("."):
                    continue
                try:
                    with open(os.path.join(self.dir, entry)) as f:
                        data = json.load(f)
                except (OSError, ValueError):
                    continue
                contains, deadline = tuple(data["contains"]), float(data["deadline_s"])
                rules[name] = Rule(name, contains, deadline) if kind == "rule" else \
                    Barrier(name, contains, int(data["parties"]), deadline)
            self.rules, self.stamp = rules, stamp
        return self.rules

    def __call__(self, event: str, args: tuple[Any, ...]) -> None:
        if event == "open":
            target = _written_path(args)
        elif event == "http.client.send":
            target = _request_line(args[1])
        else:
            return
        if target is None or getattr(self.local, "busy", False):
            return
        self.local.busy = True  # the hook opens files itself
        try:
            for rule in self._load().values():
                if all(s in target for s in rule.contains):
                    if isinstance(rule, Barrier):
                        self._line_up(rule)
                    else:
                        self._hold(rule, target)
        finally:
            self.local.busy = False

    def _hold(self, rule: Rule, target: str) -> None:
        marker = os.path.join(self.dir, f"{rule.name}.held")
        try:
            fd = os.open(f"{marker}.tmp", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return  # another write holds (or held) this rule
        pid = os.getpid()
        executor = executor_of(pid)
        os.write(fd, json.dumps({"target": target, "pid": pid, "ancestors": ancestors(pid),
                                 "executor_pid": executor}).encode())
        os.close(fd)
        os.rename(f"{marker}.tmp", marker)
        release = os.path.join(self.dir, f"{rule.name}.release")
        end = time.monotonic() + rule.deadline_s
        while not os.path.exists(release) and time.monotonic() < end:
            if executor is not None and not running(executor):
                os._exit(1)  # the executor is gone, and with it this task attempt
            time.sleep(POLL_S)  # polling an observable condition, bounded by the deadline


    def _line_up(self, barrier: Barrier) -> None:
        if barrier.name in self.passed:
            return
        self.passed.add(barrier.name)
        with open(os.path.join(self.dir, f"{barrier.name}.at.{os.getpid()}"), "w"):
            pass
        prefix = f"{barrier.name}.at."
        end = time.monotonic() + barrier.deadline_s
        while time.monotonic() < end:
            if sum(1 for e in os.listdir(self.dir) if e.startswith(prefix)) >= barrier.parties:
                return
            time.sleep(BARRIER_POLL_S)


def _written_path(args: Sequence[Any]) -> str | None:
    path, mode, flags = [*args, None, None, None][:3]
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if not isinstance(path, str):
        return None  # a file descriptor
    writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or \
        (isinstance(flags, int) and flags & (os.O_WRONLY | os.O_RDWR))
    return path if writing else None


def _request_line(data: Any) -> str | None:
    if isinstance(data, str):
        data = data.encode("latin-1", "replace")
    if not isinstance(data, (bytes, bytearray)) or not data.startswith(_HTTP_METHODS):
        return None  # a body chunk
    return bytes(data.split(b"\r\n", 1)[0]).decode("latin-1")


def _track_busy(busy: str) -> None:
    """Wrap the daemon's per-task function so each worker marks itself busy while it has a task."""
    from pyspark import daemon

    serve_one = daemon.worker

    def worker(sock: socket.socket, authenticated: bool) -> int:
        # A reused worker waits here for its next task: idle until its first byte arrives.
        try:
            sock.recv(1, socket.MSG_PEEK)
        except OSError:
            pass
        marker = os.path.join(busy, str(os.getpid()))
        try:
            with open(marker, "w"):
                pass
        except OSError:  # a test hook must never fail a task
            marker = ""
        try:
            return serve_one(sock, authenticated)
        finally:
            if marker:
                os.unlink(marker)

    daemon.worker = worker


def install(directory: str | None = None) -> bool:
    """Install both hooks in this process (and the workers it forks) when a directory is set."""
    directory = directory or os.environ.get(HOOKS_ENV)
    if not directory:
        return False
    holds, busy = os.path.join(directory, "holds"), os.path.join(directory, "busy")
    os.makedirs(holds, exist_ok=True)
    os.makedirs(busy, exist_ok=True)
    sys.addaudithook(_AuditHook(holds))
    _track_busy(busy)
    return True


if __name__ == "__main__":  # the executor runs: python -m outcommit_devtools.sparkhooks pyspark.worker
    install()
    from pyspark import daemon

    daemon.manager()
