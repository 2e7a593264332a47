"""The loopback fault proxy against a real upstream HTTP server (``outcommit_devtools.faultproxy``).

Each action is checked from both ends: what the client receives, and whether the
upstream server saw the request (an ambiguous request must reach it; a refused one not).
"""

from __future__ import annotations

import http.client
import itertools
import json
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from generative import budget
from outcommit_devtools.faultproxy import (
    PHASE_PATH,
    TRACE_PATH,
    CriticalPath,
    FaultProxy,
    Rule,
    Trace,
    TracedRequest,
    close_after,
    critical_path,
    drop_response,
    reset,
    respond,
    s3_error,
)


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
        if self.server.gate is not None:
            self.server.gate.wait()  # answer once every request of the round has arrived
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
        self.gate: threading.Barrier | None = None
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


def test_close_after_answers_then_ends_the_kept_alive_connection(proxy: tuple[FaultProxy, Upstream]) -> None:
    """The answer arrives whole and names no ``Connection: close``; then the stream ends
    (a server's idle timeout), counted once the proxy has closed it."""
    import select

    from outcommit_devtools.sparkcluster import wait_until

    fault_proxy, upstream = proxy
    fault_proxy.add(Rule("idle", close_after(), path=r"^/idle", times=1))
    conn = http.client.HTTPConnection("127.0.0.1", int(fault_proxy.url.rsplit(":", 1)[1]), timeout=30)
    conn.request("GET", "/idle")
    response = conn.getresponse()
    assert (response.status, response.read(), response.will_close) == (200, b"GET /idle 0", False)
    assert conn.sock is not None
    assert select.select([conn.sock], [], [], 30)[0] and conn.sock.recv(1) == b""  # the end of the stream
    # Counted just after the close: the count may trail the client's read of it.
    wait_until(lambda: fault_proxy.closed_after == 1, 30.0, "the proxy to count the close")
    assert upstream.seen == ["GET /idle"]
    conn.close()


# -- the recording and the critical path ----------------------------------------------------------
def traced(*schedule: tuple[int, int], phase: str = "") -> list[TracedRequest]:
    """Requests from (arrival, answer) event numbers (-1: never answered)."""
    return [TracedRequest(i, "GET", f"/b/{i}", "", "c", arrived=a, phase=phase, answered=b, status=200)
            for i, (a, b) in enumerate(schedule)]


def test_serial_requests_count_one_each() -> None:
    requests = traced(*[(2 * i + 1, 2 * i + 2) for i in range(5)])
    path = critical_path(requests)
    assert (path.length, path.peak_in_flight) == (5, 1)
    assert [r.index for r in path.chain] == [0, 1, 2, 3, 4]


def test_parallel_requests_count_one() -> None:
    # All six arrive before the first answer: one round trip, six in flight.
    path = critical_path(traced(*[(i + 1, 7 + i) for i in range(6)]))
    assert (path.length, path.peak_in_flight) == (1, 6)


def test_fan_out_then_join_counts_two() -> None:
    fan_out = [(i + 1, 5 + i) for i in range(4)]  # arrive 1-4, answered 5-8
    assert critical_path(traced(*fan_out, (9, 10))).length == 2
    # A setup request before the fan-out, the join after it: three.
    setup_first = [(1, 2), *[(3 + i, 7 + i) for i in range(4)], (11, 12)]
    assert critical_path(traced(*setup_first)).length == 3


def test_a_request_that_overlaps_a_flow_does_not_extend_it() -> None:
    # Two flows of three requests, each of B's sent while A's request is still in flight:
    # A: (1,3) (5,7) (9,11); B: (2,4) (6,8) (10,12). Each B follows the A before it only if it
    # arrived after A's answer: B2 (6) after A1's answer (3), B3 (10) after A2's (7): 3, not 6.
    requests = traced((1, 3), (5, 7), (9, 11), (2, 4), (6, 8), (10, 12))
    assert critical_path(requests).length == 3


def test_phases_are_counted_apart_and_summed() -> None:
    first = traced((1, 2), (3, 4), phase="setup")
    second = [TracedRequest(10 + i, "PUT", "/b/x", "", "c", arrived=6 + i, phase="commit",
                            answered=9 + i, status=200) for i in range(3)]
    path = critical_path([*first, *second], phases=("setup", "commit", "cleanup"))
    assert path.by_phase == {"setup": 2, "commit": 1, "cleanup": 0}
    assert path.length == 3
    assert [r.phase for r in path.chain] == ["setup", "setup", "commit"]


def test_a_request_never_answered_still_counts() -> None:
    assert critical_path(traced((1, 2), (3, -1))).length == 2


def longest_chain_by_brute_force(requests: list[TracedRequest]) -> int:
    """The definition, quadratic: B follows A if B arrived after A was answered."""
    ordered = sorted(requests, key=lambda r: r.arrived)
    depth: dict[int, int] = {}
    for b in ordered:
        depth[b.index] = 1 + max((depth[a.index] for a in ordered
                                  if a.answered >= 0 and a.answered < b.arrived), default=0)
    return max(depth.values(), default=0)


@pytest.mark.generative
@budget(50)
@given(st.lists(st.tuples(st.integers(0, 60), st.integers(1, 20)), max_size=25))
def test_the_one_pass_count_is_the_longest_chain(spans: list[tuple[int, int]]) -> None:
    """Any arrival/answer order (event numbers made distinct): the count is the definition's."""
    events = sorted([(start, 0, i) for i, (start, _) in enumerate(spans)]
                    + [(start + length, 1, i) for i, (start, length) in enumerate(spans)])
    numbers = {(kind, i): n + 1 for n, (_, kind, i) in enumerate(events)}
    requests = traced(*[(numbers[(0, i)], numbers[(1, i)]) for i in range(len(spans))])
    path = critical_path(requests)
    assert path.length == longest_chain_by_brute_force(requests)
    # The chain returned is one: each request arrived after the one before it was answered.
    assert len(path.chain) == path.length
    assert all(b.arrived > a.answered for a, b in itertools.pairwise(path.chain))


@pytest.mark.generative
@budget(25)
@given(st.lists(st.integers(1, 6), min_size=1, max_size=8), st.randoms(use_true_random=False))
def test_rounds_of_parallel_requests_count_one_each(rounds: list[int], rnd: Any) -> None:
    """Round after round (each sent once the one before has all been answered), arrivals
    and answers of a round in any order: the count is the number of rounds."""
    schedule: list[tuple[int, int]] = []
    event = 0
    for size in rounds:
        arrivals = list(range(event + 1, event + size + 1))
        answers = list(range(event + size + 1, event + 2 * size + 1))
        rnd.shuffle(answers)
        schedule += list(zip(arrivals, answers, strict=True))
        event += 2 * size
    rnd.shuffle(schedule)
    path = critical_path(traced(*schedule))
    assert path.length == len(rounds)
    assert path.peak_in_flight == max(rounds)


# Through the real proxy: the upstream holds answers until every request of a round arrived
# (a barrier: an event, not a sleep), so "in flight together" is certain, not likely.
@pytest.fixture
def traced_proxy() -> Iterator[tuple[FaultProxy, Upstream]]:
    upstream = Upstream()
    thread = threading.Thread(target=upstream.serve_forever, daemon=True)
    thread.start()
    host, port = upstream.server_address[:2]
    with FaultProxy(f"http://{host!s}:{port}", trace=True) as fault_proxy:
        yield fault_proxy, upstream
    upstream.shutdown()
    upstream.server_close()


def in_parallel(proxy: FaultProxy, upstream: Upstream, count: int) -> None:
    upstream.gate = threading.Barrier(count, timeout=30)
    try:
        with ThreadPoolExecutor(count) as pool:
            assert [s for s, _ in pool.map(lambda i: request(proxy, "GET", f"/b/p{i}"), range(count))] \
                == [200] * count
    finally:
        upstream.gate = None


def recorded(proxy: FaultProxy) -> CriticalPath:
    status, body = request(proxy, "GET", TRACE_PATH)
    assert status == 200
    return critical_path(Trace.requests_of(json.loads(body)))


def test_the_proxy_counts_serial_requests(traced_proxy: tuple[FaultProxy, Upstream]) -> None:
    fault_proxy, _ = traced_proxy
    for i in range(4):
        assert request(fault_proxy, "PUT", f"/b/k{i}", b"x")[0] == 200
    path = recorded(fault_proxy)
    assert (path.length, path.requests, path.peak_in_flight) == (4, 4, 1)
    assert [r.describe() for r in path.chain] == [f"PUT /b/k{i}" for i in range(4)]


def test_the_proxy_counts_parallel_requests_once(traced_proxy: tuple[FaultProxy, Upstream]) -> None:
    fault_proxy, upstream = traced_proxy
    in_parallel(fault_proxy, upstream, 5)
    path = recorded(fault_proxy)
    assert (path.length, path.requests, path.peak_in_flight) == (1, 5, 5)


def test_the_proxy_counts_a_fan_out_and_its_join(traced_proxy: tuple[FaultProxy, Upstream]) -> None:
    fault_proxy, upstream = traced_proxy
    in_parallel(fault_proxy, upstream, 4)
    assert request(fault_proxy, "POST", "/b?delete", b"x")[0] == 200
    assert recorded(fault_proxy).length == 2


def test_phase_marks_split_the_count_and_a_reset_starts_anew(
        traced_proxy: tuple[FaultProxy, Upstream]) -> None:
    fault_proxy, upstream = traced_proxy
    assert request(fault_proxy, "PUT", PHASE_PATH + "job%20setup")[0] == 200
    request(fault_proxy, "PUT", "/b/marker", b"x")
    request(fault_proxy, "GET", "/b/marker")
    assert request(fault_proxy, "PUT", PHASE_PATH + "tasks")[0] == 200
    in_parallel(fault_proxy, upstream, 3)
    _, body = request(fault_proxy, "GET", TRACE_PATH + "?reset=1")
    data = json.loads(body)
    assert [name for name, _ in data["phases"]] == ["job setup", "tasks"]
    path = critical_path(Trace.requests_of(data))
    assert (path.by_phase, path.length) == ({"job setup": 2, "tasks": 1}, 3)
    # Marks and the recording are the proxy's own: never forwarded, never recorded.
    assert not any("__outcommit" in seen for seen in upstream.seen)
    assert recorded(fault_proxy).requests == 0


def test_a_proxy_that_does_not_trace_says_so(proxy: tuple[FaultProxy, Upstream]) -> None:
    fault_proxy, upstream = proxy
    status, body = request(fault_proxy, "PUT", PHASE_PATH + "x")
    assert status == 404 and b"trace=True" in body
    assert upstream.seen == []


def test_floor_mode_forwards_and_answers_as_the_server(proxy: tuple[FaultProxy, Upstream]) -> None:
    _, upstream = proxy
    host, port = upstream.server_address[:2]
    with FaultProxy(f"http://{host!s}:{port}", delay_ms=5, delay_mode="floor", trace=True) as floor:
        assert request(floor, "PUT", "/b/key?partNumber=1", b"123") == (200, b"PUT /b/key?partNumber=1 3")
        assert "latency floor 5 ms" in floor.describe()
        assert recorded(floor).length == 1
    with pytest.raises(ValueError, match="delay_mode"):
        FaultProxy(f"http://{host!s}:{port}", delay_mode="sometimes")  # type: ignore[arg-type]


@pytest.mark.s3
def test_the_proxy_and_the_cost_model_count_a_job_commit_alike(s3_server: Any) -> None:
    """Two independent counts of the same job commit's round trips in sequence: the
    proxy's (arrivals and answers of real requests) and the cost model's (a virtual clock
    that follows the committer's threads: one request = one unit)."""
    import outcommit
    from outcommit_devtools.costmodel import CostModel, metered_job_commit

    with FaultProxy(s3_server.endpoint_url, delay_ms=200, delay_mode="floor", trace=True) as floor:
        config = {**s3_server.config, "outcommit.s3.endpoint": floor.url,
                  "outcommit.committer.threads": "8"}
        url = f"s3://outcommit-test/critical-{uuid.uuid4().hex}"
        committer = outcommit.create_committer(url, config, "magic")
        job = outcommit.JobContext(url, config=committer.config)
        committer.setup_job(job)
        messages = []
        for index in range(2):
            task = job.task_attempt(index)
            committer.setup_task(task)
            fs, base = committer.filesystem(task), committer.work_path(task)
            for n in range(3):
                fs.pipe_file(f"{base}/day={n}/part-{index}.parquet", b"x" * 100)
            messages.append(committer.commit_task(task))
        assert request(floor, "PUT", PHASE_PATH + "job%20commit")[0] == 200
        meter = metered_job_commit(committer, job, messages, CostModel(request_latency=1.0, connections=8))
        _, body = request(floor, "GET", TRACE_PATH)
    path = critical_path(Trace.requests_of(json.loads(body)))
    # Check beside the record, completions (6 on 8 threads) beside the marker's deletion and
    # the state's listing, the sweep, _SUCCESS, the state's deletion beside a listing: 5.
    # (The model also prices the bodies' bytes: microseconds here.)
    assert path.by_phase["job commit"] == round(meter.modelled_seconds, 3) == 5
