"""A loopback HTTP reverse proxy that injects real network faults (and latency).

It sits in front of a store emulator (moto, Azurite, the GCS emulator): clients are
pointed at the proxy's URL and every request really travels proxy -> server. Rules pick
requests by method, path, query and header, and act on them N times or always:

* ``respond(status, body)``: answer for the server (throttling: 503 SlowDown, 429...);
* ``reset()``: reset the client's connection before the request is forwarded;
* ``drop_response()``: forward, let the server act, then reset the client's connection
  instead of answering (the ambiguous request: done, but the client cannot know);
* ``stall(seconds)``: hold the request, never forward it, then reset (a request that
  times out: the client hears nothing back);
* ``delay(seconds)``: hold the request, then forward it.

``delay_ms`` adds a fixed latency to *every* request (the benchmarks' latency proxy;
the kernel here has no netem). It is printed by ``describe()``: a figure measured
through the proxy means nothing without it. Upstream connections are kept alive and
pooled, so the proxy adds one loopback hop and no connection set-up per request.

    with FaultProxy("http://127.0.0.1:5000", delay_ms=30) as proxy:
        proxy.add(Rule("complete", respond(503, s3_error("SlowDown")), method="POST",
                       query=r"uploadId=", times=2))
        ... point the client at proxy.url ...

Standalone: ``python -m outcommit_devtools.faultproxy --upstream URL --delay-ms 30``.
"""

from __future__ import annotations

import argparse
import http.client
import io
import json
import re
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal
from urllib.parse import urlsplit

ActionKind = Literal["respond", "reset", "drop-response", "stall", "delay"]

# Headers that describe one connection, not the message: never relayed.
_HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization",
                         "te", "trailers", "transfer-encoding", "upgrade", "expect",
                         "proxy-connection"})
_UPSTREAM_TIMEOUT = 120.0


@dataclass(frozen=True)
class Action:
    """What a rule does to a request it fires on."""

    kind: ActionKind
    status: int = 0
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = ()
    seconds: float = 0.0

    def describe(self) -> str:
        if self.kind == "respond":
            return f"answer {self.status}"
        if self.kind in ("stall", "delay"):
            return f"{self.kind} {self.seconds:g} s"
        return self.kind


def respond(status: int, body: bytes = b"", content_type: str = "application/xml",
            headers: dict[str, str] | None = None) -> Action:
    """Answer ``status`` with ``body`` instead of the server."""
    extra = {"Content-Type": content_type, **(headers or {})}
    return Action("respond", status=status, body=body, headers=tuple(extra.items()))


def reset() -> Action:
    """Reset the connection before forwarding: the server never sees the request."""
    return Action("reset")


def drop_response() -> Action:
    """Forward the request, then reset instead of answering: the server acted."""
    return Action("drop-response")


def stall(seconds: float) -> Action:
    """Hold the request ``seconds`` without forwarding it, then reset the connection."""
    return Action("stall", seconds=seconds)


def delay(seconds: float) -> Action:
    """Hold the request ``seconds``, then forward it."""
    return Action("delay", seconds=seconds)


def s3_error(code: str, message: str = "", status_hint: str = "") -> bytes:
    """An S3 error document, as S3 sends with a 4xx/5xx (botocore reads the Code)."""
    text = message or {"SlowDown": "Please reduce your request rate.",
                       "TooManyRequests": "Too many requests.",
                       "RequestTimeout": "Your socket connection to the server was not read "
                                         "from or written to within the timeout period.",
                       "InternalError": "We encountered an internal error. Please try again.",
                       }.get(code, code)
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code>'
            f"<Message>{text}</Message><RequestId>faultproxy{status_hint}</RequestId>"
            "<HostId>faultproxy</HostId></Error>").encode()


def azure_error(code: str, message: str = "") -> bytes:
    """An Azure Storage error document (the SDK reads the Code)."""
    return (f'<?xml version="1.0" encoding="utf-8"?><Error><Code>{code}</Code>'
            f"<Message>{message or code}</Message></Error>").encode()


def gcs_error(status: int, reason: str, message: str = "") -> bytes:
    """A Google Cloud Storage JSON API error document."""
    return json.dumps({"error": {"code": status, "message": message or reason,
                                 "errors": [{"reason": reason, "message": message or reason}]}}).encode()


@dataclass
class Rule:
    """Act on requests matching every given criterion (regexes are searched).

    ``times``: how many matching requests it fires on (-1: every one), after letting
    ``skip`` matching requests through. ``matched``/``fired`` are counted under the
    proxy's lock, so a test can assert that its fault really happened.
    """

    name: str
    action: Action
    method: str | None = None
    path: str | None = None
    query: str | None = None
    header: str | None = None
    times: int = 1
    skip: int = 0
    matched: int = field(default=0, init=False)
    fired: int = field(default=0, init=False)

    def matches(self, method: str, path: str, query: str, headers: Any) -> bool:
        return ((self.method is None or method == self.method)
                and (self.path is None or re.search(self.path, path) is not None)
                and (self.query is None or re.search(self.query, query) is not None)
                and (self.header is None or headers.get(self.header) is not None))

    def describe(self) -> str:
        what = " ".join(p for p in (self.method, self.path and f"path~{self.path}",
                                    self.query and f"query~{self.query}",
                                    self.header and f"header {self.header}") if p)
        count = "always" if self.times < 0 else f"{self.times}x"
        skip = f" after {self.skip}" if self.skip else ""
        return f"{self.name}: {what or 'any request'} -> {self.action.describe()} {count}{skip}"


class _UpstreamPool:
    """Keep-alive connections to the server, reused across client connections.

    An idle connection is dropped before the server's own keep-alive timeout can close
    it under a request (Node's, so Azurite's, is 5 s): a request never meets a stale one.
    """

    IDLE_SECONDS = 2.0

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self._idle: list[tuple[http.client.HTTPConnection, float]] = []
        self._lock = threading.Lock()

    def acquire(self, fresh: bool = False) -> tuple[http.client.HTTPConnection, bool]:
        """A connection and whether it was used before."""
        stale: list[http.client.HTTPConnection] = []
        chosen = None
        with self._lock:
            now = time.monotonic()
            while self._idle and not fresh:
                conn, since = self._idle.pop()
                if now - since < self.IDLE_SECONDS:
                    chosen = conn
                    break
                stale.append(conn)
        for conn in stale:
            conn.close()
        if chosen is not None:
            return chosen, True
        return http.client.HTTPConnection(self.host, self.port, timeout=_UPSTREAM_TIMEOUT), False

    def release(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            self._idle.append((conn, time.monotonic()))

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn, _ in idle:
            conn.close()


class FaultProxy:
    """A reverse proxy on 127.0.0.1 in front of ``upstream`` (``http://host:port``)."""

    def __init__(self, upstream: str, delay_ms: float = 0.0, host: str = "127.0.0.1",
                 port: int = 0) -> None:
        parts = urlsplit(upstream)
        if parts.scheme != "http" or not parts.hostname or not parts.port:
            raise ValueError(f"upstream must be http://host:port, got {upstream!r}")
        self.upstream = f"http://{parts.hostname}:{parts.port}"
        self.delay_ms = float(delay_ms)
        self.rules: list[Rule] = []
        self.requests = 0
        self.upstream_errors: list[str] = []
        self._lock = threading.Lock()
        self._pool = _UpstreamPool(parts.hostname, parts.port)
        self._server = _Server((host, port), _handler_for(self))
        self._server.proxy = self
        self._thread: threading.Thread | None = None

    # -- life cycle ------------------------------------------------------------------
    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> FaultProxy:
        self._thread = threading.Thread(target=self._server.serve_forever, name="faultproxy",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._pool.close()
        if self._thread is not None:
            self._thread.join()

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def describe(self) -> str:
        """One line with every setting that changes what a client measures."""
        return (f"fault proxy {self.url} -> {self.upstream}, added latency {self.delay_ms:g} ms "
                f"per request, {len(self.rules)} fault rule(s)")

    # -- rules -------------------------------------------------------------------------
    def add(self, rule: Rule) -> Rule:
        with self._lock:
            self.rules.append(rule)
        return rule

    def clear(self) -> None:
        with self._lock:
            self.rules = []

    def note_upstream_error(self, method: str, path: str, exc: BaseException) -> None:
        """A failure of the proxy itself (not an injected fault): a cell seeing one is void."""
        with self._lock:
            self.upstream_errors.append(f"{method} {path}: {type(exc).__name__}: {exc}")

    def rewrite(self, location: str) -> str:
        """A server URL in a response header (resumable upload URLs) made to point here."""
        return self.url + location[len(self.upstream):] if location.startswith(self.upstream) else location

    def pick(self, method: str, path: str, query: str, headers: Any) -> Action | None:
        with self._lock:
            self.requests += 1
            for rule in self.rules:
                if not rule.matches(method, path, query, headers):
                    continue
                rule.matched += 1
                if rule.matched <= rule.skip or (0 <= rule.times <= rule.fired):
                    continue
                rule.fired += 1
                return rule.action
        return None

    def forward(self, method: str, target: str, headers: list[tuple[str, str]],
                body: bytes) -> tuple[int, str, list[tuple[str, str]], bytes]:
        """Send the request upstream on a pooled connection; (status, reason, headers, body)."""
        for attempt in (1, 2):
            conn, reused = self._pool.acquire(fresh=attempt > 1)
            try:
                conn.putrequest(method, target, skip_host=True, skip_accept_encoding=True)
                for name, value in headers:
                    conn.putheader(name, value)
                conn.endheaders(body if body or method in ("POST", "PUT", "PATCH") else None)
                _ack_at_once(conn)
                response = conn.getresponse()
                data = response.read()
            except TimeoutError:
                conn.close()
                raise  # the server may have acted: never sent twice
            except (OSError, http.client.HTTPException):
                conn.close()
                # A pooled connection the server closed while it was idle (a keep-alive
                # timeout racing our request): once more, on a new connection.
                if reused and attempt == 1:
                    continue
                raise
            except BaseException:
                conn.close()
                raise
            if response.will_close:
                conn.close()
            else:
                self._pool.release(conn)
            return response.status, response.reason, response.getheaders(), data
        raise AssertionError("unreachable")


def _ack_at_once(conn: http.client.HTTPConnection) -> None:
    """Acknowledge the server's first segment at once (Linux TCP_QUICKACK).

    A server that writes its headers and body separately with Nagle on (werkzeug, so
    moto) holds the body until the headers are acknowledged; a delayed ACK makes that
    40 ms per response. The proxy must not add that latency, nor pass it on.
    """
    quickack = getattr(socket, "TCP_QUICKACK", None)
    if quickack is not None and conn.sock is not None:
        try:
            conn.sock.setsockopt(socket.IPPROTO_TCP, quickack, 1)
        except OSError:
            pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # many client connections at once (benchmarks)
    proxy: FaultProxy

    def handle_error(self, request: Any, client_address: Any) -> None:
        """No traceback: a client that goes away is normal here. Anything else is noted."""
        exc = sys.exc_info()[1]
        if exc is not None and not isinstance(exc, (ConnectionError, TimeoutError)):
            self.proxy.note_upstream_error("handler", str(client_address), exc)


def _read_body(handler: BaseHTTPRequestHandler) -> bytes:
    if handler.headers.get("Transfer-Encoding", "").lower() == "chunked":
        chunks: list[bytes] = []
        while True:
            size = int(handler.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while handler.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return b"".join(chunks)
            chunks.append(handler.rfile.read(size))
            handler.rfile.readline()
    length = int(handler.headers.get("Content-Length") or 0)
    return handler.rfile.read(length) if length else b""


def _abort_connection(handler: BaseHTTPRequestHandler) -> None:
    """Close the client's connection with a TCP RST: the client gets no response at all."""
    handler.close_connection = True
    sock = handler.connection
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    # Every file object on the socket must go, or close() leaves the descriptor open; the
    # handler's own flush and finish() then write into nothing.
    for stream in (handler.rfile, handler.wfile):
        try:
            stream.close()
        except (OSError, ValueError):
            pass
    handler.rfile, handler.wfile = io.BytesIO(), io.BytesIO()
    sock.close()


def _handler_for(proxy: FaultProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive with the client
        # Headers and body leave in one write, never held back by Nagle + delayed ACK
        # (40 ms per response otherwise: more than the latency a benchmark adds).
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: the proxy's clients log what matters."""

        def _proxy(self) -> None:
            body = _read_body(self)
            path, _, query = self.path.partition("?")
            action = proxy.pick(self.command, path, query, self.headers)
            if proxy.delay_ms:
                time.sleep(proxy.delay_ms / 1000.0)  # the configured latency, not synchronisation
            if action is not None and action.kind in ("stall", "delay"):
                time.sleep(action.seconds)
            if action is not None and action.kind in ("reset", "stall"):
                _abort_connection(self)
                return
            if action is not None and action.kind == "respond":
                self._answer(action.status, "", list(action.headers), action.body)
                return
            headers = [(k, v) for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP]
            if body and not any(k.lower() == "content-length" for k, _ in headers):
                headers.append(("Content-Length", str(len(body))))
            try:
                status, reason, out_headers, data = proxy.forward(self.command, self.path, headers, body)
            except (OSError, http.client.HTTPException) as exc:
                proxy.note_upstream_error(self.command, self.path, exc)
                _abort_connection(self)  # the server is gone: so is the answer
                return
            if action is not None and action.kind == "drop-response":
                _abort_connection(self)
                return
            self._answer(status, reason, out_headers, data)

        def _answer(self, status: int, reason: str, headers: list[tuple[str, str]],
                    data: bytes) -> None:
            self.send_response_only(status, reason or None)
            head = self.command == "HEAD"
            for name, value in headers:
                lower = name.lower()
                if lower in _HOP_BY_HOP or (lower == "content-length" and not head):
                    continue
                self.send_header(name, proxy.rewrite(value) if lower == "location" else value)
            if not head:
                self.send_header("Content-Length", str(len(data)))
            # end_headers() with the body in the same buffer: one write for the whole answer.
            pending: list[bytes] = self._headers_buffer  # type: ignore[attr-defined]
            pending.append(b"\r\n")
            if data and not head:
                pending.append(data)
            self.flush_headers()

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = do_PATCH = do_OPTIONS = _proxy

    return Handler


def main(argv: list[str] | None = None, serve: Callable[[FaultProxy], None] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m outcommit_devtools.faultproxy",
        description="Loopback HTTP proxy adding a fixed latency (and faults) in front of a server")
    parser.add_argument("--upstream", required=True, help="http://host:port of the server")
    parser.add_argument("--delay-ms", type=float, default=0.0, help="added latency per request")
    parser.add_argument("--port", type=int, default=0, help="port to listen on (default: any free)")
    args = parser.parse_args(argv)
    proxy = FaultProxy(args.upstream, delay_ms=args.delay_ms, port=args.port).start()
    print(proxy.describe(), flush=True)
    try:
        if serve is not None:
            serve(proxy)
        else:
            threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        proxy.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
