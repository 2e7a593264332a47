"""Install (once, from npm) and start Azurite's Blob service on a free local port.

Used by the tests, the benchmark and ``outcommit demo --store azure``::

    azurite = start_azurite()
    azurite.create_container("data")
    committer = outcommit.create_committer("abfs://data/table", azurite.config())
    ...
    azurite.stop()

Azurite is installed with npm into ``$OUTCOMMIT_AZURITE_DIR`` (default
``~/.cache/outcommit/azurite``), outside any repository, the first time it is needed.
Only node and npm have to be on PATH. Azurite has the Blob API only (no hierarchical
namespace): the store measures that and declares the Blob capabilities.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from outcommit.testing.faults import stop_process

from .store import CONNECTION_STRING_KEY

HOST = "127.0.0.1"
INSTALL_DIR_ENV = "OUTCOMMIT_AZURITE_DIR"
AZURITE_PACKAGE = "azurite@3"
# Azurite's published development account (documented by Microsoft, not a secret).
ACCOUNT = "devstoreaccount1"
ACCOUNT_KEY = ("Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/"
               "K1SZFPTOtr/KBHBeksoGMGw==")


def install_dir() -> Path:
    return Path(os.environ.get(INSTALL_DIR_ENV) or Path.home() / ".cache" / "outcommit" / "azurite")


def ensure_azurite(directory: Path | None = None, timeout: float = 600) -> Path:
    """The ``azurite-blob`` executable, installed with npm into ``directory`` if missing."""
    directory = directory or install_dir()
    binary = directory / "node_modules" / ".bin" / "azurite-blob"
    if binary.exists():
        return binary
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("Azurite is needed but npm is not on PATH: install Node.js and npm")
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two test processes must not install at once
        if not binary.exists():
            command = [npm, "install", "--no-audit", "--no-fund", "--no-save",
                       "--prefix", str(directory), AZURITE_PACKAGE]
            try:
                subprocess.run(command, check=True, stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=timeout)
            except subprocess.CalledProcessError as exc:
                detail = (exc.stderr or b"").decode(errors="replace").strip()[-2000:]
                raise RuntimeError(
                    f"installing Azurite failed: `npm install {AZURITE_PACKAGE}` into {directory} "
                    f"exited with {exc.returncode} (is the npm registry reachable?): {detail}"
                ) from None
            except subprocess.TimeoutExpired:
                raise RuntimeError(
                    f"installing Azurite timed out after {timeout:.0f} s: `npm install "
                    f"{AZURITE_PACKAGE}` into {directory} (is the npm registry reachable?)"
                ) from None
    if not binary.exists():
        raise RuntimeError(f"npm installed Azurite but {binary} is missing")
    return binary


def _free_port(host: str = HOST) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


@dataclass
class Azurite:
    """A running Azurite Blob service: endpoint, connection string, outcommit config, ``stop()``."""

    endpoint: str
    process: Any = field(repr=False, default=None)
    location: str = ""

    @property
    def connection_string(self) -> str:
        return (f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={ACCOUNT_KEY};"
                f"BlobEndpoint={self.endpoint};")

    def config(self) -> dict[str, str]:
        # No outcommit.azure.hns: the store asks the account (Azurite answers "no HNS").
        return {CONNECTION_STRING_KEY: self.connection_string}

    def create_container(self, name: str) -> None:
        from azure.core.exceptions import ResourceExistsError
        from azure.storage.blob import BlobServiceClient

        with contextlib.suppress(ResourceExistsError):
            BlobServiceClient.from_connection_string(self.connection_string).create_container(name)

    def stop(self) -> None:
        if self.process is not None:
            stop_process(self.process)
        self.process = None
        if self.location:
            shutil.rmtree(self.location, ignore_errors=True)


def start_azurite(host: str = HOST, ready_timeout: float = 30) -> Azurite:
    """Start Azurite's Blob service with a temporary ``--location`` on a free port."""
    binary = ensure_azurite()
    location = tempfile.mkdtemp(prefix="outcommit-azurite-")
    port = _free_port(host)
    errors = Path(location) / "azurite-stderr.log"  # a file, so a chatty server never blocks
    with open(errors, "wb") as err:
        process = subprocess.Popen(
            [str(binary), "--blobHost", host, "--blobPort", str(port), "--location", location,
             "--silent", "--skipApiVersionCheck", "--loose", "--disableTelemetry"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
    azurite = Azurite(f"http://{host}:{port}/{ACCOUNT}", process, location)
    deadline = time.monotonic() + ready_timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            error = errors.read_text(errors="replace")
            azurite.stop()
            raise RuntimeError(f"Azurite exited at start (code {process.returncode}): {error}")
        try:
            socket.create_connection((host, port), timeout=0.5).close()
            return azurite
        except OSError:
            time.sleep(0.05)  # polling for readiness, not waiting for an outcome
    azurite.stop()
    raise RuntimeError(f"Azurite did not listen on {host}:{port} within {ready_timeout} s")
