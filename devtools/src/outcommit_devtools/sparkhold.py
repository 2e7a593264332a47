"""Hold one write of a Spark task mid-way, so a test can kill its executor at a known point.

The data source writes a task's files one after another inside ``write()``; nothing in
the public API stops it half-way. This module stops it at the I/O boundary instead, the
way a hung disk or network would: it runs as the executors' pyspark daemon
(``spark.python.daemon.module=outcommit_devtools.sparkhold``), adds a Python audit hook,
then runs pyspark's own daemon; every Python worker the daemon forks inherits the hook.

A *rule* is a JSON file ``<name>.rule`` in the hold directory (``OUTCOMMIT_HOLD_DIR`` in
the executors' environment, ``spark.executorEnv.OUTCOMMIT_HOLD_DIR``) listing substrings.
The first write whose target contains all of them is held: a local file opened for
writing (audit event ``open``) or an HTTP request sent through ``http.client`` (event
``http.client.send``: boto3, hence every S3 committer operation). The holding worker
creates ``<name>.held`` (exclusively: one holder per rule) with its pid, its parent chain
and its executor JVM's pid, then waits until ``<name>.release`` exists, its executor JVM
is gone (it then exits, as its daemon would make it), or the rule's deadline passes.
Writes through aiohttp (s3fs, adlfs) raise no audit event and cannot be held.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .sparkcluster import ancestors, executor_of, running, wait_until

HOLD_DIR_ENV = "OUTCOMMIT_HOLD_DIR"
DAEMON_MODULE = "outcommit_devtools.sparkhold"
POLL_S = 0.05
_HTTP_METHODS = (b"PUT ", b"POST ", b"GET ", b"HEAD ", b"DELETE ")


@dataclass(frozen=True)
class Rule:
    """Hold the first write whose target (path, or HTTP request line) contains every substring."""

    name: str
    contains: tuple[str, ...]
    deadline_s: float = 120.0


@dataclass(frozen=True)
class Held:
    """What the holding worker recorded: who it is and which write it holds."""

    target: str
    pid: int
    ancestors: tuple[int, ...]
    executor_pid: int | None


class HoldDir:
    """The test's side: add rules, wait until one holds a write, release it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.mkdir(parents=True, exist_ok=True)

    def add(self, rule: Rule) -> None:
        tmp = self.path / f".{rule.name}.tmp"
        tmp.write_text(json.dumps({"contains": list(rule.contains), "deadline_s": rule.deadline_s}))
        tmp.rename(self.path / f"{rule.name}.rule")  # workers never see half a rule

    def wait_held(self, name: str, deadline_s: float = 120.0) -> Held:
        marker = self.path / f"{name}.held"

        def read() -> Held | None:
            try:
                data = json.loads(marker.read_text())
            except (OSError, ValueError):
                return None  # not there yet, or still being written
            return Held(data["target"], data["pid"], tuple(data["ancestors"]), data["executor_pid"])

        held: Held = wait_until(read, deadline_s, f"a write matching rule {name!r} to be held")
        return held

    def release(self, name: str) -> None:
        (self.path / f"{name}.release").touch()

    def clear(self) -> None:
        """Remove every rule and marker: release everything still held first."""
        for rule in self.path.glob("*.rule"):
            self.release(rule.stem)
            rule.unlink()
        for leftover in [*self.path.glob("*.held"), *self.path.glob("*.release")]:
            leftover.unlink(missing_ok=True)


# -- the executors' side ------------------------------------------------------------------------
class _Hook:
    def __init__(self, hold_dir: str) -> None:
        self.dir = hold_dir
        self.local = threading.local()
        self.rules: dict[str, Rule] = {}
        self.stamp: int | None = None

    def _load(self) -> dict[str, Rule]:
        # The directory's mtime changes when a rule appears or goes: re-read only then
        # (this runs on every file a worker opens, imports included).
        try:
            stamp = os.stat(self.dir).st_mtime_ns
        except OSError:
            return {}
        if stamp != self.stamp:
            rules = {}
            for entry in os.listdir(self.dir):
                if entry.endswith(".rule"):
                    try:
                        with open(os.path.join(self.dir, entry)) as f:
                            data = json.load(f)
                    except (OSError, ValueError):
                        continue
                    name = entry[:-len(".rule")]
                    rules[name] = Rule(name, tuple(data["contains"]), float(data["deadline_s"]))
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
                    self._hold(rule, target)
        finally:
            self.local.busy = False

    def _hold(self, rule: Rule, target: str) -> None:
        marker = os.path.join(self.dir, f"{rule.name}.held")
        try:
            fd = os.open(marker + ".tmp", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return  # another write holds (or held) this rule
        pid = os.getpid()
        executor = executor_of(pid)
        os.write(fd, json.dumps({"target": target, "pid": pid, "ancestors": ancestors(pid),
                                 "executor_pid": executor}).encode())
        os.close(fd)
        os.rename(marker + ".tmp", marker)
        release = os.path.join(self.dir, f"{rule.name}.release")
        end = time.monotonic() + rule.deadline_s
        while not os.path.exists(release) and time.monotonic() < end:
            if executor is not None and not running(executor):
                os._exit(1)  # the executor is gone: so is this task attempt
            time.sleep(POLL_S)  # polling an observable condition, bounded by the deadline


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


def install(hold_dir: str | None = None) -> bool:
    """Add the hook to this process (and so to the processes it forks) when a hold dir is set."""
    hold_dir = hold_dir or os.environ.get(HOLD_DIR_ENV)
    if not hold_dir:
        return False
    sys.addaudithook(_Hook(hold_dir))
    return True


def spark_conf(hold_dir: Path) -> dict[str, str]:
    """Session config that makes every executor's Python workers honour the rules in ``hold_dir``."""
    return {"spark.python.daemon.module": DAEMON_MODULE,
            f"spark.executorEnv.{HOLD_DIR_ENV}": str(hold_dir)}


if __name__ == "__main__":  # run by the executor as: python -m outcommit_devtools.sparkhold pyspark.worker
    install()
    from pyspark import daemon

    daemon.manager()
