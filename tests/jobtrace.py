"""Pins of a job's requests and sequential round trips, seen by the traced fault proxy.

A committer's requests go through :class:`~outcommit_devtools.faultproxy.FaultProxy` in
front of the real server (moto, Azurite). Each call pinned runs in its own phase with
a latency floor, so that requests the committer sends together overlap in the proxy's
recording (:func:`~outcommit_devtools.faultproxy.critical_path`: why the floor makes the
count faithful); what runs between the pinned calls (setup, tasks) goes without it.
The figures are counts, not timings: the floor only orders events.

A round trip is counted where a request arrived after an answer it may have waited for:
on a starved machine an unrelated request can arrive that late by chance, and a run
then counts one more than the job makes; never fewer (a request that waits for an
answer always arrives after it). :func:`settled` measures again in that case and keeps
the least count: a real extra round trip shows in every run.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

from outcommit_devtools.faultproxy import FaultProxy, TracedRequest, critical_path

#: The latency floor of a pinned phase: far above the client's CPU per request times its
#: fan-out on a busy machine, so that requests sent together always overlap.
FLOOR_MS = 300.0
#: Runs of a pinned job at most, while its round trips exceed the pins (:func:`settled`).
RUNS = 3


def _params(request: TracedRequest) -> dict[str, str]:
    return dict(part.partition("=")[::2] for part in request.query.split("&") if part)


def s3_operation(request: TracedRequest) -> str:
    """The S3 API operation a request is (by its method and query keys)."""
    params, method = _params(request), request.method
    if method == "POST":
        return ("CreateMultipartUpload" if "uploads" in params else
                "CompleteMultipartUpload" if "uploadId" in params else
                "DeleteObjects" if "delete" in params else "POST")
    if method == "PUT":
        return "UploadPart" if "partNumber" in params else "PutObject"
    if method == "GET":
        return ("ListObjectsV2" if "list-type" in params else
                "ListMultipartUploads" if "uploads" in params else
                "ListParts" if "uploadId" in params else "GetObject")
    if method == "DELETE":
        return "AbortMultipartUpload" if "uploadId" in params else "DeleteObject"
    return {"HEAD": "HeadObject"}.get(method, method)


def azure_operation(request: TracedRequest) -> str:
    """The Blob API operation a request is (by its method, ``restype`` and ``comp``)."""
    params = _params(request)
    return " ".join(p for p in (request.method, params.get("restype", ""), params.get("comp", "")) if p)


@dataclass(frozen=True)
class Pin:
    """One call's requests by operation, and its sequential round trips."""

    operations: dict[str, int]
    round_trips: int


@dataclass
class JobTrace:
    """Runs calls in pinned phases through ``proxy`` (its ``url`` is the endpoint to use)."""

    proxy: FaultProxy
    name_of: Callable[[TracedRequest], str]
    phases: list[str] = field(default_factory=list)

    @contextmanager
    def pinned(self, phase: str) -> Iterator[None]:
        """The block's requests are the phase's (the block's calls return before it ends)."""
        assert self.proxy.trace is not None and phase not in self.phases
        self.phases.append(phase)
        self.proxy.trace.mark(phase)
        self.proxy.delay_ms = FLOOR_MS
        try:
            yield
        finally:
            self.proxy.delay_ms = 0.0
            self.proxy.trace.mark(f"after {phase}")

    def pins(self) -> dict[str, Pin]:
        """Every pinned phase's requests by operation and its round trips."""
        assert self.proxy.trace is not None
        requests = list(self.proxy.trace.requests)
        path = critical_path(requests, self.phases)
        return {phase: Pin(dict(sorted(Counter(self.name_of(r) for r in requests if r.phase == phase)
                                       .items())), path.by_phase[phase])
                for phase in self.phases}


@contextmanager
def job_trace(upstream: str, name_of: Callable[[TracedRequest], str]) -> Iterator[JobTrace]:
    """A traced proxy in front of ``upstream`` (``http://host:port``), floor mode."""
    with FaultProxy(upstream, delay_mode="floor", trace=True) as proxy:
        yield JobTrace(proxy, name_of)


def settled(measure: Callable[[], dict[str, Pin]], expected: Mapping[str, Pin]) -> dict[str, Pin]:
    """``measure()``'s pins, run again (up to :data:`RUNS` times) while they differ from
    ``expected`` in round trips only; each phase's least round trips of the runs."""
    best = measure()
    for _ in range(RUNS - 1):
        if best == expected:
            break
        again = measure()
        if {p: pin.operations for p, pin in again.items()} != {p: pin.operations for p, pin in best.items()}:
            return again  # the requests themselves vary: no pin holds
        best = {phase: Pin(pin.operations, min(pin.round_trips, again[phase].round_trips))
                for phase, pin in best.items()}
    return best
