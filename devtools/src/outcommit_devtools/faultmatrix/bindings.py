"""Store bindings of the matrix: where each store lives and how every cell reaches it.

A binding is one store scheme with a real backend: a temporary directory (``file``),
fsspec's in-process memory (``memory``; ``memmp``: the same with core's S3-semantics
multipart uploads), the moto server (``s3``), Azurite (``azure``) and the GCS emulator
(``gcs``). The three network stores are reached through a
:class:`~outcommit_devtools.faultproxy.FaultProxy`, so a cell can inject HTTP faults;
the proxy adds no latency here.

:func:`started_servers` starts the emulators, each in a process of its own;
:func:`open_bindings` puts a proxy in front of each and creates the bucket/container
every cell makes its own directory in.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from outcommit.testing.faults import stop_process

from ..faultproxy import FaultProxy

STORES: tuple[str, ...] = ("file", "memory", "memmp", "s3", "azure", "gcs")
NETWORK_STORES: tuple[str, ...] = ("s3", "azure", "gcs")  # an emulator behind a fault proxy
BUCKET = "outcommit-faultmatrix"


@dataclass
class Binding:
    """One store binding: the URL root of the matrix in it and the config to reach it.

    ``separate_processes``: whether a forked process sees the same data (``memory`` and
    ``memmp`` live inside one interpreter, so driver kills cannot be tried there).
    ``proxy``: the fault proxy in front of the server, None without a network layer.
    ``container``: the bucket/container (or directory) holding ``root``, whose top
    level every cell checks is left alone.
    ``new_container``: creates a fresh bucket/container/directory and returns its URL
    (for the bucket-root scenarios).
    """

    name: str
    root: str
    config: dict[str, str]
    container: str = ""
    separate_processes: bool = True
    proxy: FaultProxy | None = None
    new_container: Callable[[], str] = field(default=lambda: "", repr=False)
    multipart_part_size: int = 0
    #: ``config`` reaching the server directly, not through the proxy: for cells without
    #: HTTP faults (relaying every request costs the matrix's process CPU; empty: same).
    direct_config: dict[str, str] = field(default_factory=dict)

    def cell_root(self, slug: str) -> str:
        """A fresh directory of one cell (unique per run, so cells never meet)."""
        return f"{self.root.rstrip('/')}/{slug}-{uuid.uuid4().hex[:8]}"


@dataclass
class Servers:
    """Running emulators; any may be None when its binding is not wanted."""

    s3: Any = None
    azure: Any = None
    gcs: Any = None


@contextlib.contextmanager
def started_servers(stores: Sequence[str]) -> Iterator[Servers]:
    """Start the emulators ``stores`` need, each in a process of its own.

    moto and the GCS emulator are Python servers: in the matrix's process they would
    compete with it for one interpreter lock (the test session's fixtures run them
    in-process; the matrix starts its own). Azurite is a Node process anyway.
    """
    servers = Servers()
    processes: list[subprocess.Popen[bytes]] = []
    try:
        if "s3" in stores:
            from outcommit_s3.embedded import EmbeddedS3

            port = _free_port()
            processes.append(_spawn([_script("moto_server"), "-H", HOST, "-p", str(port)], port))
            servers.s3 = EmbeddedS3(endpoint_url=f"http://{HOST}:{port}", server=_Stopper(processes[-1]),
                                    max_attempts=1)
        if "azure" in stores:
            from outcommit_azure.emulator import start_azurite

            servers.azure = start_azurite()
        if "gcs" in stores:
            from outcommit_gcs.emulator import GcsEmulator

            port = _free_port()
            processes.append(_spawn([_script("gcp-storage-emulator"), "start", "-H", HOST, "--port",
                                     str(port), "--in-memory", "-q"], port))
            servers.gcs = GcsEmulator(f"http://{HOST}:{port}", _server=_Stopper(processes[-1]))
        yield servers
    finally:
        for server in (servers.s3, servers.azure, servers.gcs):
            if server is not None:
                server.stop()
        for process in processes:
            _Stopper(process).stop()


HOST = "127.0.0.1"
READY_SECONDS = 60.0


class _Stopper:
    """``stop()`` for an emulator process (the interface the emulators' wrappers expect)."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process

    def stop(self) -> None:
        stop_process(self.process)


def _script(name: str) -> str:
    """A console script of this environment (next to the interpreter)."""
    path = os.path.join(os.path.dirname(sys.executable), name)
    if not os.path.exists(path):
        raise RuntimeError(f"{name} is not installed next to {sys.executable}")
    return path


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def _spawn(command: list[str], port: int) -> subprocess.Popen[bytes]:
    """Start a server and wait until it accepts connections (a readiness poll, with a deadline)."""
    env = {**os.environ, "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false"}
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, env=env)
    deadline = time.monotonic() + READY_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{command[0]} exited with {process.returncode} at start")
        try:
            socket.create_connection((HOST, port), timeout=0.5).close()
            return process
        except OSError:
            time.sleep(0.05)  # polling for readiness, not waiting for an outcome
    _Stopper(process).stop()
    raise RuntimeError(f"{command[0]} did not listen on {HOST}:{port} within {READY_SECONDS:.0f} s")


@contextlib.contextmanager
def open_bindings(stores: Sequence[str], servers: Servers) -> Iterator[dict[str, Binding]]:
    """Bindings for ``stores``, with a fault proxy in front of every server."""
    proxies: list[FaultProxy] = []
    scratch = tempfile.mkdtemp(prefix="outcommit-faultmatrix-")
    try:
        bindings: dict[str, Binding] = {}
        for name in stores:
            maker = _MAKERS.get(name)
            if maker is None:
                raise ValueError(f"unknown store binding {name!r}: choose from {', '.join(STORES)}")
            bindings[name] = maker(servers, scratch, proxies)
        yield bindings
    finally:
        for proxy in proxies:
            proxy.stop()
        shutil.rmtree(scratch, ignore_errors=True)


# -- one maker per binding ------------------------------------------------------------------
def _file(servers: Servers, scratch: str, proxies: list[FaultProxy]) -> Binding:
    root = os.path.join(scratch, "file")
    os.makedirs(root)

    def new_container() -> str:
        return "file://" + tempfile.mkdtemp(prefix="root-", dir=scratch)

    return Binding("file", f"file://{root}", _retries(), f"file://{root}", new_container=new_container)


def _memory(servers: Servers, scratch: str, proxies: list[FaultProxy]) -> Binding:
    def new_container() -> str:
        return f"memory:///fm-root-{uuid.uuid4().hex[:8]}"

    root = f"memory:///faultmatrix-{uuid.uuid4().hex[:8]}"
    return Binding("memory", root, _retries(), root, separate_processes=False,
                   new_container=new_container)


# memmp's smallest part: every part but the last must have it (S3's 5 MiB by default); a
# small one lets a mid-write death leave a real uploaded part without writing megabytes.
MEMMP_PART_SIZE = 64 * 1024


def _memmp(servers: Servers, scratch: str, proxies: list[FaultProxy]) -> Binding:
    """Files in fsspec's global memory filesystem and uploads in a module of this process
    (``outcommit.stores.memmp``): a driver process killed with SIGKILL would take its own
    copy of both with it, and a process started for it would see none of this one's, so it
    is bound as ``memory`` is (no driver or attempt killed apart)."""
    from outcommit.stores.memmp import MIN_PART_SIZE_KEY, PART_SIZE_KEY

    def new_container() -> str:
        return f"memmp:///fm-root-{uuid.uuid4().hex[:8]}"

    root = f"memmp:///faultmatrix-{uuid.uuid4().hex[:8]}"
    config = {MIN_PART_SIZE_KEY: str(MEMMP_PART_SIZE), PART_SIZE_KEY: str(MEMMP_PART_SIZE), **_retries()}
    return Binding("memmp", root, config, root, separate_processes=False,
                   new_container=new_container, multipart_part_size=MEMMP_PART_SIZE)


# S3 settings of every s3 cell: the smallest legal part (5 MiB) so a mid-write death can
# leave a real uploaded part; 3 attempts per request (botocore standard mode: exponential
# backoff with jitter), so two throttled answers are absorbed and a third is not.
S3_PART_SIZE = 5 * 1024 * 1024
S3_ATTEMPTS = "3"


def _s3(servers: Servers, scratch: str, proxies: list[FaultProxy]) -> Binding:
    server = _need(servers.s3, "s3")
    proxy = FaultProxy(server.endpoint_url).start()
    proxies.append(proxy)
    server.create_bucket(BUCKET)
    config = {**server.config, "outcommit.s3.endpoint": proxy.url,
              "outcommit.s3.retry.max-attempts": S3_ATTEMPTS,
              "outcommit.s3.multipart.part-size": str(S3_PART_SIZE),
              "outcommit.committer.threads": "4", **_retries()}

    def new_container() -> str:
        bucket = f"fm-root-{uuid.uuid4().hex[:12]}"
        server.create_bucket(bucket)
        return f"s3://{bucket}"

    return Binding("s3", f"s3://{BUCKET}/matrix-{uuid.uuid4().hex[:8]}", config, f"s3://{BUCKET}",
                   proxy=proxy, new_container=new_container, multipart_part_size=S3_PART_SIZE,
                   direct_config={**config, "outcommit.s3.endpoint": server.endpoint_url})


def _azure(servers: Servers, scratch: str, proxies: list[FaultProxy]) -> Binding:
    from outcommit_azure.store import CONNECTION_STRING_KEY

    server = _need(servers.azure, "azure")
    upstream = server.endpoint.rsplit("/", 1)[0]  # http://host:port, without the account
    proxy = FaultProxy(upstream).start()
    proxies.append(proxy)
    server.create_container(BUCKET)
    config = {CONNECTION_STRING_KEY: server.connection_string.replace(upstream, proxy.url),
              **_retries()}

    def new_container() -> str:
        container = f"fm-root-{uuid.uuid4().hex[:12]}"
        server.create_container(container)
        return f"abfs://{container}"

    return Binding("azure", f"abfs://{BUCKET}/matrix-{uuid.uuid4().hex[:8]}", config, f"abfs://{BUCKET}",
                   proxy=proxy, new_container=new_container,
                   direct_config={**config, CONNECTION_STRING_KEY: server.connection_string})


def _gcs(servers: Servers, scratch: str, proxies: list[FaultProxy]) -> Binding:
    from outcommit_gcs.store import ENDPOINT_KEY

    server = _need(servers.gcs, "gcs")
    proxy = FaultProxy(server.endpoint).start()
    proxies.append(proxy)
    server.create_bucket(BUCKET)
    config = {**server.config(), ENDPOINT_KEY: proxy.url, **_retries()}

    def new_container() -> str:
        bucket = f"fm-root-{uuid.uuid4().hex[:12]}"
        server.create_bucket(bucket)
        return f"gs://{bucket}"

    return Binding("gcs", f"gs://{BUCKET}/matrix-{uuid.uuid4().hex[:8]}", config, f"gs://{BUCKET}",
                   proxy=proxy, new_container=new_container,
                   direct_config={**config, ENDPOINT_KEY: server.endpoint})


def _retries() -> dict[str, str]:
    # outcommit's own retry policy (full jitter) with a first cap of 20 ms instead of 200
    # and 4 attempts instead of 8: the matrix checks that retries happen and that the last
    # failure is reported for what it is, not how long they wait.
    return {"outcommit.retry.backoff-ms": "20", "outcommit.retry.attempts": "4"}


def _need(server: Any, name: str) -> Any:
    if server is None:
        raise ValueError(f"the {name} binding needs its emulator running")
    return server


_MAKERS: Mapping[str, Callable[[Servers, str, list[FaultProxy]], Binding]] = {
    "file": _file, "memory": _memory, "memmp": _memmp, "s3": _s3, "azure": _azure, "gcs": _gcs,
}
