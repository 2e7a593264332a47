"""The loopback fault proxy against a real upstream HTTP server (``outcommit_devtools.faultproxy``).

Each action is checked from both ends: what the client receives, and whether the
upstream server saw the request (an ambiguous request must reach it; a refused one not).
"""

from __future__ import annotations

import http.client
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from outcommit_devtools.faultproxy import FaultProxy, Rule, drop_response, reset, respond, s3_error


class Echo(BaseHTTPRequestHandler):
    """Answers 200 with the request line and body length; the server records the request."""

    protocol_version = "HTTP/1.1"
    server: Upstream

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        self.server.seen.append(f"{self.command} {self.path}")
        data = f"{self.command} {self.path} {len(body)}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_PUT = do_POST = _answer


class Upstream(ThreadingHTTPServer):
    """The real server behind the proxy; ``seen``: every request it received."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        super().__init__(("127.0.0.1", 0), Echo)


@pytest.fixture
def proxy() -> Iterator[tuple[FaultProxy, Upstream]]:
    upstream = Upstream()
    thread = threading.Thread(target=upstream.serve_forever, daemon=True)
    thread.start()
    host, port = upstream.server_address[:2]
    with FaultProxy(f"http://{host!s}:{port}") as fault_proxy:
        yield fault_proxy, upstream
    upstream.shutdown()
    upstream.server_close()


def request(proxy: FaultProxy, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
    host, port = proxy.url.rsplit(":", 1)
    conn = http.client.HTTPConnection(host.removeprefix("http://"), int(port), timeout=10)
    try:
        conn.request(method, path, body=body or None)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def test_requests_are_forwarded_without_rules(proxy: tuple[FaultProxy, Upstream]) -> None:
    fault_proxy, upstream = proxy
    assert request(fault_proxy, "PUT", "/b/key?partNumber=1", b"12345") == (200, b"PUT /b/key?partNumber=1 5")
    assert upstream.seen == ["PUT /b/key?partNumber=1"]
    assert fault_proxy.upstream_errors == []


def test_a_throttling_answer_replaces_the_server_n_times(proxy: tuple[FaultProxy, Upstream]) -> None:
    fault_proxy, upstream = proxy
    rule = fault_proxy.add(Rule("slow", respond(503, s3_error("SlowDown")), method="POST",
                                query=r"uploadId=", times=2))
    statuses = [request(fault_proxy, "POST", "/b/key?uploadId=1")[0] for _ in range(3)]
    assert statuses == [503, 503, 200]
    assert (rule.matched, rule.fired) == (3, 2)
    assert upstream.seen == ["POST /b/key?uploadId=1"]  # the throttled ones never arrived
    request(fault_proxy, "GET", "/b?list-type=2")  # another request: no rule matches it
    assert rule.matched == 3


def test_reset_never_forwards_and_drop_response_forwards(proxy: tuple[FaultProxy, Upstream]) -> None:
    fault_proxy, upstream = proxy
    fault_proxy.add(Rule("reset", reset(), path=r"^/refused", times=1))
    fault_proxy.add(Rule("lost", drop_response(), path=r"^/acted", times=1))
    with pytest.raises((ConnectionError, http.client.HTTPException)):
        request(fault_proxy, "PUT", "/refused", b"x")
    with pytest.raises((ConnectionError, http.client.HTTPException)):
        request(fault_proxy, "PUT", "/acted", b"x")
    # The ambiguous request reached the server; the reset one did not.
    assert upstream.seen == ["PUT /acted"]
    assert request(fault_proxy, "PUT", "/refused", b"x")[0] == 200  # the rule fired once
    assert fault_proxy.upstream_errors == []
