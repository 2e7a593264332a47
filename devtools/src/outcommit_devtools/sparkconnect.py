"""A Spark Connect server on loopback, started by pip's pyspark ``sbin/start-connect-server.sh``.

    with start_connect_server(Path("/tmp/connect")) as server:
        spark = SparkSession.builder.remote(server.url).getOrCreate()

The server runs in the foreground (``--wait``) in its own process group, so stopping it
stops its driver and the Python workers it started. Its Python workers (the data source's
driver-side steps and tasks) run ``python``, which must import outcommit.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from .sparkcluster import (
    START_DEADLINE_S,
    ClusterError,
    Daemon,
    _signal_group,
    daemon_env,
    free_port,
    spark_home,
    wait_until,
)


@dataclass
class ConnectServer:
    """A running server: ``url`` (``sc://127.0.0.1:<port>``) for ``SparkSession.builder.remote``."""

    url: str
    port: int
    daemon: Daemon

    def stop(self, deadline_s: float = 30.0) -> None:
        import signal

        _signal_group(self.daemon.process.pid, signal.SIGTERM)
        try:
            self.daemon.process.wait(timeout=deadline_s)
        except subprocess.TimeoutExpired:
            _signal_group(self.daemon.process.pid, signal.SIGKILL)
            self.daemon.process.wait(timeout=10)

    def __enter__(self) -> ConnectServer:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def start_connect_server(workdir: Path, master: str = "local[2]", python: str = sys.executable,
                         conf: dict[str, str] | None = None,
                         deadline_s: float = START_DEADLINE_S) -> ConnectServer:
    """Start the server; return once its gRPC port accepts connections."""
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    settings = {"spark.connect.grpc.binding.address": "127.0.0.1",
                "spark.connect.grpc.binding.port": str(port),
                "spark.ui.enabled": "false", "spark.driver.host": "127.0.0.1",
                "spark.driver.bindAddress": "127.0.0.1", **(conf or {})}
    args = ["bash", str(spark_home() / "sbin" / "start-connect-server.sh"), "--wait",
            "--master", master]
    for key, value in settings.items():
        args += ["--conf", f"{key}={value}"]
    # The server is a Spark driver (local[2]: its executors too): it needs the driver memory.
    env = daemon_env(python, "127.0.0.1", {"SPARK_LOG_DIR": str(workdir), "SPARK_PID_DIR": str(workdir),
                                          "SPARK_DAEMON_MEMORY": "1g"})
    log = workdir / "connect-server.log"
    with open(log, "ab") as out:
        process = subprocess.Popen(args, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    server = ConnectServer(f"sc://127.0.0.1:{port}", port, Daemon("connect-server", process, log))

    def ready() -> bool:
        if not server.daemon.alive():
            raise ClusterError("the Spark Connect server exited during startup")
        return _listening(port)

    try:
        wait_until(ready, deadline_s, f"the Spark Connect server on 127.0.0.1:{port}", 0.25)
    except (ClusterError, TimeoutError) as exc:
        tail = server.daemon.tail(40)
        server.stop()
        raise ClusterError(f"the Spark Connect server did not come up: {exc}\n{tail}") from exc
    except BaseException:
        server.stop()
        raise
    return server
