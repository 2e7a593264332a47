"""A Spark standalone cluster on loopback, started from pip's pyspark: one master, N workers.

Why: ``local[N]`` runs every task in one executor JVM, so Spark never launches a
speculative copy and no executor can be lost. A standalone cluster of one-core workers
gives each task attempt its own executor JVM with its own Python workers.

Each worker advertises its own loopback address (127.0.0.1, 127.0.0.2, ...): Spark never
starts a speculative copy of a task on a host that already runs an attempt of it, and it
compares host names, so two workers on one address could never speculate.

    with start_cluster(Path("/tmp/cluster")) as cluster:
        spark = SparkSession.builder.master(cluster.master_url).getOrCreate()

By hand: ``python -m outcommit_devtools.sparkcluster --dir /tmp/cluster`` (Ctrl-C stops it).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"
START_DEADLINE_S = 180.0  # two JVMs on a busy 2-core machine take 10-30 s; leave room


class ClusterError(RuntimeError):
    """The cluster did not come up (the message carries the tail of its logs)."""


def spark_home() -> Path:
    """The pyspark package directory: pip's pyspark ships ``bin/spark-class`` and ``jars/``."""
    import pyspark

    home = Path(pyspark.__file__).resolve().parent
    if not (home / "bin" / "spark-class").exists() or not (home / "jars").is_dir():
        raise ClusterError(f"{home} has no bin/spark-class or jars/: install pyspark from PyPI")
    return home


def free_port(host: str = "127.0.0.1") -> int:
    """A port free on ``host`` now (the OS picks it; another process could still take it)."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def worker_host(index: int) -> str:
    """Loopback address of worker ``index``: 127.0.0.1, 127.0.0.2, ..."""
    return f"127.0.0.{index + 1}"


def wait_until(condition: Callable[[], Any], deadline_s: float, what: str,
               interval_s: float = 0.1) -> Any:
    """Poll ``condition`` until it returns something truthy; TimeoutError naming ``what``."""
    end = time.monotonic() + deadline_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= end:
            raise TimeoutError(f"timed out after {deadline_s:.0f} s waiting for {what}")
        time.sleep(interval_s)


@dataclass
class Daemon:
    """One master or worker JVM: its process (leader of its own process group) and log."""

    name: str
    process: subprocess.Popen[bytes]
    log: Path

    def alive(self) -> bool:
        return self.process.poll() is None

    def tail(self, lines: int = 25) -> str:
        try:
            text = self.log.read_text(errors="replace").splitlines()
        except OSError:
            return f"--- {self.name}: no log at {self.log}"
        return "\n".join([f"--- {self.name} ({self.log}):", *text[-lines:]])


@dataclass
class SparkCluster:
    """A running cluster: ``master_url`` for sessions, ``web_url`` for the master's JSON status."""

    master_url: str
    web_url: str
    workdir: Path
    python: str
    daemons: list[Daemon] = field(default_factory=list)

    def status(self) -> dict[str, Any]:
        """The master's JSON status (workers, their state, cores, running applications)."""
        with urllib.request.urlopen(f"{self.web_url}/json/", timeout=5) as response:
            return dict(json.load(response))

    def alive_workers(self) -> int:
        try:
            workers = self.status().get("workers", [])
        except OSError:
            return 0  # the master's web UI is not listening yet
        except ValueError:
            # Not JSON yet: while a master starts, before it is elected leader, its web UI
            # can answer /json/ with an HTML page (seen in CI on a loaded machine).
            return 0
        return sum(1 for w in workers if w.get("state") == "ALIVE")

    def log_tails(self, lines: int = 25) -> str:
        return "\n".join(d.tail(lines) for d in self.daemons)

    def stop(self, deadline_s: float = 30.0) -> None:
        """SIGTERM every process group (workers first: their executors are in them), then SIGKILL."""
        for daemon in reversed(self.daemons):
            _signal_group(daemon.process.pid, signal.SIGTERM)
        end = time.monotonic() + deadline_s
        for daemon in reversed(self.daemons):
            try:
                daemon.process.wait(timeout=max(0.1, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            # Executors left behind by a worker that died first share its process group.
            _signal_group(daemon.process.pid, signal.SIGKILL)
            if daemon.alive():
                daemon.process.wait(timeout=10)
        self.daemons.clear()

    def __enter__(self) -> SparkCluster:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _spawn(name: str, args: list[str], env: dict[str, str], log: Path) -> Daemon:
    with open(log, "ab") as out:
        # A new session: the daemon and the executors a worker launches form one process
        # group, stopped together even when the test run is interrupted half-way.
        process = subprocess.Popen([str(spark_home() / "bin" / "spark-class"), *args], env=env,
                                   stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    return Daemon(name, process, log)


def daemon_env(python: str, local_ip: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.update({
        "SPARK_HOME": str(spark_home()),
        "SPARK_LOCAL_IP": local_ip,
        # Executors' Python workers must import pyarrow and outcommit: this interpreter's venv.
        "PYSPARK_PYTHON": python,
        "SPARK_DAEMON_MEMORY": "256m",  # master and worker JVMs need little; executors get 1g
        "SPARK_NO_DAEMONIZE": "1",
    })
    env.update(extra or {})
    return env


def start_cluster(workdir: Path, workers: int = 2, cores: int = 1, memory: str = "1g",
                  python: str = sys.executable, deadline_s: float = START_DEADLINE_S,
                  env: dict[str, str] | None = None) -> SparkCluster:
    """Start a master and ``workers`` workers; return once they are all ALIVE at the master.

    Logs go to ``workdir/<name>.log``, each worker's executors to ``workdir/<worker>/``.
    On failure everything started is stopped and :class:`ClusterError` shows the log tails.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    port, web_port = free_port(), free_port()
    cluster = SparkCluster(master_url=f"spark://127.0.0.1:{port}", web_url=f"http://127.0.0.1:{web_port}",
                           workdir=workdir, python=python)
    try:
        cluster.daemons.append(_spawn(
            "master", [MASTER_CLASS, "--host", "127.0.0.1", "--port", str(port), "--webui-port",
                       str(web_port)], daemon_env(python, "127.0.0.1", env), workdir / "master.log"))
        for index in range(workers):
            host, name = worker_host(index), f"worker{index + 1}"
            (workdir / name).mkdir(exist_ok=True)
            worker_env = daemon_env(python, host, {
                **(env or {}), "SPARK_WORKER_DIR": str(workdir / name),
                "SPARK_LOCAL_DIRS": str(workdir / name)})
            cluster.daemons.append(_spawn(
                name, [WORKER_CLASS, "--host", host, "--cores", str(cores), "--memory", memory,
                       "--webui-port", str(free_port(host)), cluster.master_url],
                worker_env, workdir / f"{name}.log"))

        def ready() -> bool:
            dead = [d.name for d in cluster.daemons if not d.alive()]
            if dead:
                raise ClusterError(f"{', '.join(dead)} exited during startup")
            return cluster.alive_workers() >= workers

        wait_until(ready, deadline_s, f"{workers} alive workers at {cluster.web_url}/json/", 0.25)
    except (ClusterError, TimeoutError, OSError) as exc:
        tails = cluster.log_tails()
        cluster.stop()
        raise ClusterError(f"the Spark cluster did not come up: {exc}\n{tails}") from exc
    except BaseException:
        cluster.stop()
        raise
    return cluster


# -- executors ------------------------------------------------------------------------------
def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def _stat(pid: int) -> tuple[str, int] | None:
    """(state letter, parent pid) from /proc, None once the process is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()  # the command name may contain spaces
    return fields[0], int(fields[1])


def running(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie (a killed executor waits for its worker)."""
    stat = _stat(pid)
    return stat is not None and stat[0] not in ("Z", "X")


def ancestors(pid: int) -> list[int]:
    """``pid``'s parent, grandparent, ... up to init."""
    chain = []
    stat = _stat(pid)
    while stat is not None and stat[1] > 1:
        chain.append(stat[1])
        stat = _stat(stat[1])
    return chain


def is_executor(pid: int) -> bool:
    return EXECUTOR_CLASS in _cmdline(pid)


def executor_of(pid: int) -> int | None:
    """The executor JVM a Python worker belongs to (worker -> pyspark daemon -> executor JVM)."""
    return next((p for p in [pid, *ancestors(pid)] if is_executor(p)), None)


def executor_pids(app_id: str) -> dict[str, int]:
    """Executor id -> PID of the running executor JVMs of application ``app_id``."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        args = _cmdline(int(entry.name))
        if EXECUTOR_CLASS in args and _arg(args, "--app-id") == app_id and running(int(entry.name)):
            found[_arg(args, "--executor-id") or "?"] = int(entry.name)
    return found


def _arg(args: list[str], name: str) -> str | None:
    return args[args.index(name) + 1] if name in args[:-1] else None


def kill_executor(pid: int, deadline_s: float = 30.0) -> None:
    """SIGKILL an executor JVM (no shutdown hooks run, as when a machine dies) and wait until gone."""
    if not is_executor(pid):
        raise ValueError(f"pid {pid} is not a Spark executor JVM: {' '.join(_cmdline(pid))[:200]}")
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: not running(pid), deadline_s, f"executor pid {pid} to exit after SIGKILL")


# -- by hand -----------------------------------------------------------------------------------
def _serve(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m outcommit_devtools.sparkcluster",
                                     description="Run a Spark standalone cluster on loopback until Ctrl-C.")
    parser.add_argument("--dir", type=Path, default=Path("spark-cluster"), help="logs and worker dirs")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cores", type=int, default=1, help="cores per worker")
    parser.add_argument("--memory", default="1g", help="memory per worker")
    args = parser.parse_args(argv)

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt  # SIGTERM too, and SIGINT even where a shell ignored it

    signal.signal(signal.SIGINT, interrupt)
    signal.signal(signal.SIGTERM, interrupt)
    with start_cluster(args.dir.resolve(), args.workers, args.cores, args.memory) as cluster:
        print(f"master  {cluster.master_url}\nstatus  {cluster.web_url}/json/\nlogs    {cluster.workdir}")
        print(f"use     PYSPARK_PYTHON={cluster.python} SPARK_LOCAL_IP=127.0.0.1 "
              f"pyspark --master {cluster.master_url}", flush=True)
        try:
            code = cluster.daemons[0].process.wait()  # the master; Ctrl-C stops everything
        except KeyboardInterrupt:
            return 0
        print(f"the master exited with {code}\n{cluster.log_tails()}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(_serve())
