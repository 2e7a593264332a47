"""Start the GCS emulator (gcp-storage-emulator, in process) on a free local port.

Used by the tests, the benchmark and ``outcommit demo --store gcs``::

    emulator = start_gcs_emulator()
    emulator.create_bucket("data")
    committer = outcommit.create_committer("gs://data/table", emulator.config())
    ...
    emulator.stop()

The emulator ignores preconditions (``ifGenerationMatch``), so its config turns on the
store's explicit destination check; it answers 501 to gcsfs's ``moveTo``, which this
store never calls.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from typing import Any

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

    def config(self) -> dict[str, str]:
        return {ENDPOINT_KEY: self.endpoint, PROJECT_KEY: self.project, TOKEN_KEY: "anon",
                PRECONDITIONS_KEY: "false"}

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
