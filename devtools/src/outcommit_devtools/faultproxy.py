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

With ``trace=True`` (``--trace``) it also records each request's arrival and answer in
its own event order, phases marked by ``PUT /__outcommit/phase/NAME`` (answered by the
proxy itself, never forwarded), and counts the requests a job made one after another
(:func:`critical_path`, whose docstring says how and why). ``GET /__outcommit/trace``
answers the recording as JSON (``?reset=1``: and starts a new one), so a proxy in its own
process serves every client process (Spark workers included) and the benchmark reads it.
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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal
from urllib.parse import unquote, urlsplit

ActionKind = Literal["respond", "reset", "drop-response", "stall", "delay", "close-after"]
DelayMode = Literal["added", "floor"]

#: A request to this path marks a phase (``PUT /__outcommit/phase/NAME``); not an S3, Azure
#: or GCS path (no bucket, account or API is named ``__outcommit``).
PHASE_PATH = "/__outcommit/phase/"
#: ``GET`` answers the recording as JSON; ``?reset=1`` starts a new one.
TRACE_PATH = "/__outcommit/trace"

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


def close_after() -> Action:
    """Forward the request and answer it, then close the connection without saying so
    (no ``Connection: close``): a server's idle timeout on a kept-alive connection.
    ``FaultProxy.closed_after`` counts these closes once done (the client's socket then
    sees the end of the stream)."""
    return Action("close-after")


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


# -- the recording and the critical path ----------------------------------------------------
@dataclass
class TracedRequest:
    """One request as the proxy saw it; ``arrived``/``answered`` are event numbers of one
    counter (the proxy's own order of events, not wall time). ``answered`` is -1 while in
    flight; a request the proxy reset is answered when it reset it (status 0)."""

    index: int
    method: str
    path: str
    query: str
    client: str
    arrived: int
    phase: str = ""
    answered: int = -1
    status: int = 0

    def describe(self) -> str:
        return f"{self.method} {self.path}{'?' + self.query if self.query else ''}"


class Trace:
    """Arrivals, answers and phase marks of the requests through a proxy, in event order."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self.requests: list[TracedRequest] = []
            self.phases: list[tuple[str, int]] = []
            self._events = 0
            self._phase = ""

    def _next(self) -> int:
        self._events += 1
        return self._events

    def arrive(self, method: str, path: str, query: str, client: str) -> TracedRequest:
        with self._lock:
            request = TracedRequest(len(self.requests), method, path, query, client,
                                    arrived=self._next(), phase=self._phase)
            self.requests.append(request)
            return request

    def answer(self, request: TracedRequest, status: int) -> None:
        with self._lock:
            if request.answered < 0:
                request.answered, request.status = self._next(), status

    def mark(self, phase: str) -> None:
        """Requests arriving from now on belong to ``phase``."""
        with self._lock:
            self.phases.append((phase, self._next()))
            self._phase = phase

    def to_json(self) -> dict[str, Any]:
        with self._lock:
            return {"phases": [list(p) for p in self.phases],
                    "requests": [[r.index, r.method, r.path, r.query, r.client, r.arrived, r.phase,
                                  r.answered, r.status] for r in self.requests]}

    @staticmethod
    def requests_of(data: Mapping[str, Any]) -> list[TracedRequest]:
        """The requests of a :meth:`to_json` recording (a proxy in another process)."""
        return [TracedRequest(*row) for row in data["requests"]]


@dataclass(frozen=True)
class CriticalPath:
    """The longest chain of requests that waited for one another, per phase.

    ``by_phase``: each marked phase's own longest chain, in the order the phases were
    marked (a phase with no request counts 0); ``length`` their sum (phases follow one
    another: a mark is sent between calls that return before the next begins).
    ``chain``: one longest chain per phase, concatenated, first request first.
    ``peak_in_flight``: the most requests the proxy held at once (event order).
    """

    length: int
    by_phase: dict[str, int]
    chain: tuple[TracedRequest, ...]
    requests: int
    peak_in_flight: int


def critical_path(requests: Sequence[TracedRequest],
                  phases: Sequence[str] = ()) -> CriticalPath:
    """Count the round trips a job made in sequence: its longest happens-before chain.

    **Method.** Request B *follows* A if B arrived after A's answer left the proxy (event
    order, one counter for both). That is necessary for B to depend on A: a client cannot
    act on an answer it has not had. So a chain of requests each following the one before
    is a sequence the client *may* have waited through, and its longest length is an upper
    bound of the true critical path (the depth of the client's real dependencies between
    requests). Computed in one pass: a request's depth is 1 + the deepest request of its
    phase answered before it arrived (Lamport's clock over arrival and answer events).

    **Why it is faithful, and when.** The bound over-counts only where independent
    requests happened to follow one another in time: B did not wait for A but arrived
    after A's answer anyway. The proxy keeps that from happening with its delay: holding
    every answer ``delay_ms`` (in ``floor`` mode: ``delay_ms`` after the request's arrival,
    the server working meanwhile, so a busy emulator does not spread the answers of one
    round), requests a client sends together overlap as long as it issues them within
    ``delay_ms`` of one another. Measure with a delay much larger than the client's CPU
    per request times its fan-out (1-2 ms x 64 threads here) and the server's time per
    round; a count that stays the same at two delays has no spurious link
    (``benchmarks/critical_path.py --check-delay-ms``). A count, not a timing: with that
    margin it does not depend on the machine's speed. (Measured: a 1,000-file job commit,
    rounds of 64 completions that moto serves in about half a second, counts 21 at 300 ms
    and 19 at 1 s, the cost model's figure.) Where a client computes between requests that
    do not wait for each other (an encoder writing file after file), no delay makes them
    overlap: there the count stays an upper bound.

    **Why not per connection or per thread.** HTTP/1.1 connections are pooled: one
    connection carries unrelated threads' requests one after another (a chain per
    connection would link them), and one thread's requests take any free connection. The
    proxy sees neither threads nor processes (Spark's Python workers, Ray's, Dask's), and
    the joins between them (a driver waiting for its tasks) are exactly what a job's
    critical path is made of: the answer-then-arrival order captures them all.

    **Phases.** A phase mark (``PUT /__outcommit/phase/NAME``, sent by the one client
    that drives the job between calls that have returned) is a join point: nothing after
    it can be waited for by anything before. Each phase's chain is counted on its own
    requests; ``phases`` lists the phases to report (those marked are always reported).
    """
    depth: dict[int, int] = {}
    parent: dict[int, int | None] = {}
    best: dict[str, tuple[int, int | None]] = {}  # phase -> (depth, its request) answered so far
    events: list[tuple[int, int, TracedRequest]] = []
    for request in requests:
        events.append((request.arrived, 0, request))
        if request.answered >= 0:
            events.append((request.answered, 1, request))
    events.sort(key=lambda e: (e[0], e[1]))
    in_flight = peak = 0
    for _, is_answer, request in events:
        if not is_answer:
            so_far, before = best.get(request.phase, (0, None))
            depth[request.index], parent[request.index] = so_far + 1, before
            in_flight += 1
            peak = max(peak, in_flight)
        else:
            in_flight -= 1
            if depth[request.index] > best.get(request.phase, (0, None))[0]:
                best[request.phase] = (depth[request.index], request.index)
    # A request never answered (the client gave up) still made its phase wait for it.
    for request in requests:
        if request.answered < 0 and depth[request.index] > best.get(request.phase, (0, None))[0]:
            best[request.phase] = (depth[request.index], request.index)
    by_index = {r.index: r for r in requests}
    names = list(dict.fromkeys([*phases, *(r.phase for r in requests)]))
    by_phase: dict[str, int] = {}
    chain: list[TracedRequest] = []
    for name in names:
        length, last = best.get(name, (0, None))
        by_phase[name] = length
        links: list[TracedRequest] = []
        while last is not None:
            links.append(by_index[last])
            last = parent[last]
        chain.extend(reversed(links))
    return CriticalPath(length=sum(by_phase.values()), by_phase=by_phase, chain=tuple(chain),
                        requests=len(requests), peak_in_flight=peak)


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
                 port: int = 0, delay_mode: DelayMode = "added", trace: bool = False) -> None:
        parts = urlsplit(upstream)
        if parts.scheme != "http" or not parts.hostname or not parts.port:
            raise ValueError(f"upstream must be http://host:port, got {upstream!r}")
        if delay_mode not in ("added", "floor"):
            raise ValueError(f"delay_mode must be 'added' or 'floor', got {delay_mode!r}")
        self.upstream = f"http://{parts.hostname}:{parts.port}"
        self.delay_ms = float(delay_ms)
        #: ``added``: hold each request ``delay_ms``, then forward it (latency on top of the
        #: server's time). ``floor``: forward at once, answer no earlier than ``delay_ms``
        #: after the request arrived (the server's time hidden under the latency, as a
        #: real store's service time is part of its round trip).
        self.delay_mode: DelayMode = delay_mode
        self.trace: Trace | None = Trace() if trace else None
        self.rules: list[Rule] = []
        self.requests = 0
        #: Connections closed by a ``close_after`` rule, counted once closed.
        self.closed_after = 0
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
        latency = (f"added latency {self.delay_ms:g} ms per request" if self.delay_mode == "added"
                   else f"latency floor {self.delay_ms:g} ms per request (the server's time within it)")
        traced = ", tracing arrivals and answers" if self.trace is not None else ""
        return (f"fault proxy {self.url} -> {self.upstream}, {latency}, {len(self.rules)} fault "
                f"rule(s){traced}")

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
        traced: TracedRequest | None = None

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: the proxy's clients log what matters."""

        def _proxy(self) -> None:
            body = _read_body(self)
            path, _, query = self.path.partition("?")
            self.traced = None  # one handler serves a keep-alive connection's requests in turn
            if path.startswith("/__outcommit/"):
                self._own(path, query)
                return
            arrived = time.monotonic()
            if proxy.trace is not None:
                client = f"{self.client_address[0]}:{self.client_address[1]}"
                self.traced = proxy.trace.arrive(self.command, path, query, client)
            try:
                self._relay(body, path, query, arrived)
            finally:
                if self.traced is not None and proxy.trace is not None:
                    proxy.trace.answer(self.traced, 0)  # no answer sent (reset): ends here

        def _own(self, path: str, query: str) -> None:
            """The proxy's own endpoints: phase marks and the recording (never forwarded)."""
            if proxy.trace is None:
                self._answer(404, "", [("Content-Type", "text/plain")],
                             b"this proxy does not trace: start it with trace=True (--trace)")
            elif path.startswith(PHASE_PATH) and len(path) > len(PHASE_PATH):
                proxy.trace.mark(unquote(path[len(PHASE_PATH):]))
                self._answer(200, "", [("Content-Type", "text/plain")], b"")
            elif path == TRACE_PATH:
                data = json.dumps(proxy.trace.to_json()).encode()
                if "reset=1" in query.split("&"):
                    proxy.trace.reset()
                self._answer(200, "", [("Content-Type", "application/json")], data)
            else:
                self._answer(404, "", [("Content-Type", "text/plain")], b"unknown proxy endpoint")

        def _relay(self, body: bytes, path: str, query: str, arrived: float) -> None:
            action = proxy.pick(self.command, path, query, self.headers)
            if proxy.delay_ms and proxy.delay_mode == "added":
                time.sleep(proxy.delay_ms / 1000.0)  # the configured latency, not synchronisation
            if action is not None and action.kind in ("stall", "delay"):
                time.sleep(action.seconds)
            if action is not None and action.kind in ("reset", "stall"):
                self._give_up()
                return
            if action is not None and action.kind == "respond":
                self._hold(arrived)
                self._answer(action.status, "", list(action.headers), action.body)
                return
            headers = [(k, v) for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP]
            if body and not any(k.lower() == "content-length" for k, _ in headers):
                headers.append(("Content-Length", str(len(body))))
            try:
                status, reason, out_headers, data = proxy.forward(self.command, self.path, headers, body)
            except (OSError, http.client.HTTPException) as exc:
                proxy.note_upstream_error(self.command, self.path, exc)
                self._give_up()  # the server is gone: so is the answer
                return
            self._hold(arrived)
            if action is not None and action.kind == "drop-response":
                self._give_up()
                return
            self._answer(status, reason, out_headers, data)
            if action is not None and action.kind == "close-after":
                self._close_quietly()

        def _close_quietly(self) -> None:
            """The end of the stream (FIN) after the answer, as a server's idle timeout."""
            self.close_connection = True
            self.wfile.flush()
            try:
                self.connection.shutdown(socket.SHUT_WR)
            except OSError:
                pass  # the client went first
            with proxy._lock:
                proxy.closed_after += 1

        def _give_up(self) -> None:
            """Reset the client's connection, recorded first (as an answer: the client's
            retry follows it)."""
            if self.traced is not None and proxy.trace is not None:
                proxy.trace.answer(self.traced, 0)
            _abort_connection(self)

        def _hold(self, arrived: float) -> None:
            """``floor`` mode: the answer leaves no earlier than ``delay_ms`` after arrival."""
            if proxy.delay_mode == "floor" and proxy.delay_ms:
                left = arrived + proxy.delay_ms / 1000.0 - time.monotonic()
                if left > 0:
                    time.sleep(left)  # the configured latency, not synchronisation

        def _answer(self, status: int, reason: str, headers: list[tuple[str, str]],
                    data: bytes) -> None:
            if self.traced is not None and proxy.trace is not None:
                # Recorded before it is written: a request that waited for this answer
                # always arrives after it in the recording (never counted as overlapping).
                proxy.trace.answer(self.traced, status)
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
    parser.add_argument("--delay-mode", choices=("added", "floor"), default="added",
                        help="added: the delay before forwarding; floor: answer no earlier than the "
                             "delay after arrival, the server working meanwhile")
    parser.add_argument("--trace", action="store_true",
                        help=f"record arrivals and answers (GET {TRACE_PATH}; phases: PUT {PHASE_PATH}NAME)")
    parser.add_argument("--port", type=int, default=0, help="port to listen on (default: any free)")
    args = parser.parse_args(argv)
    proxy = FaultProxy(args.upstream, delay_ms=args.delay_ms, port=args.port,
                       delay_mode=args.delay_mode, trace=args.trace).start()
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
