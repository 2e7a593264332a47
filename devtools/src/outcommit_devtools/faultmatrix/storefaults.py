"""What a :class:`~.scenarios.StoreFault` does on each store: proxy rules or wrapper faults.

HTTP faults are rules of the binding's fault proxy: the request really reaches (or does
not reach) the emulator, the client really sees a throttling answer, a reset connection
or no answer at all. Rename faults use the core's ``FaultInjectingStore``: the rename
really happens, then the call raises, as when the response of a rename is lost.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from outcommit.store import Store
from outcommit.testing.faults import Fault, FaultInjectingStore

from ..faultproxy import (
    Action,
    FaultProxy,
    Rule,
    azure_error,
    drop_response,
    gcs_error,
    reset,
    respond,
    s3_error,
    stall,
)
from .scenarios import StoreFault

# Which requests a target names, per store (regexes over method, path, query, header).
TARGETS: Mapping[str, Mapping[str, Mapping[str, str]]] = {
    "s3": {
        "complete": {"method": "POST", "query": r"(^|&)uploadId="},
        "initiate": {"method": "POST", "query": r"(^|&)uploads(=|&|$)"},
        "upload-part": {"method": "PUT", "query": r"(^|&)partNumber="},
        "pendingset-put": {"method": "PUT", "path": r"\.pendingset$"},
        "delete-objects": {"method": "POST", "query": r"(^|&)delete(=|&|$)"},
        "list": {"method": "GET", "query": r"(^|&)list-type=2"},
    },
    "azure": {
        "copy": {"method": "PUT", "header": "x-ms-copy-source"},
        "put-blob": {"method": "PUT", "header": "x-ms-blob-type"},
        # Put Block List: the blocklist committer's completion at job commit.
        "block-list": {"method": "PUT", "query": r"(^|&)comp=blocklist"},
        "list": {"method": "GET", "query": r"(^|&)comp=list"},
    },
    "gcs": {
        "rewrite": {"method": "POST", "path": r"/rewriteTo/"},
        "upload": {"method": "POST", "path": r"^/upload/"},
        "list": {"method": "GET", "path": r"/o$"},
    },
}

# A client-side timeout: the proxy holds the request (never forwarded) longer than the
# cell's read timeout, then resets; the client gives up first. Cells of this fault set
# the store's read timeout to CLIENT_TIMEOUT (``client_timeout_config``).
CLIENT_TIMEOUT = "2s"
STALL_SECONDS = 5.0

_S3_ACTIONS: Mapping[str, Action] = {
    "throttle-503": respond(503, s3_error("SlowDown")),
    "client-timeout": stall(STALL_SECONDS),
    "throttle-429": respond(429, s3_error("TooManyRequests")),
    "server-timeout": respond(400, s3_error("RequestTimeout")),
    "reset": reset(),
    "ambiguous": drop_response(),
}
_AZURE_ACTIONS: Mapping[str, Action] = {
    "throttle-503": respond(503, azure_error("ServerBusy", "The server is busy."),
                            headers={"x-ms-error-code": "ServerBusy"}),
    "server-timeout": respond(500, azure_error("OperationTimedOut", "Operation could not be "
                                               "completed within the specified time."),
                              headers={"x-ms-error-code": "OperationTimedOut"}),
    "reset": reset(),
    "ambiguous": drop_response(),
}
_GCS_ACTIONS: Mapping[str, Action] = {
    "throttle-429": respond(429, gcs_error(429, "rateLimitExceeded"), "application/json"),
    "throttle-503": respond(503, gcs_error(503, "backendError"), "application/json"),
    "server-timeout": respond(408, gcs_error(408, "requestTimeout"), "application/json"),
    "reset": reset(),
    "ambiguous": drop_response(),
}
ACTIONS: Mapping[str, Mapping[str, Action]] = {"s3": _S3_ACTIONS, "azure": _AZURE_ACTIONS,
                                               "gcs": _GCS_ACTIONS}

# Words a loud failure must contain to name its cause (any one of them).
CAUSES: Mapping[str, tuple[str, ...]] = {
    "throttle-503": ("SlowDown", "ServerBusy", "503", "throttl", "backendError"),
    "throttle-429": ("TooManyRequests", "429", "rateLimitExceeded", "throttl"),
    "server-timeout": ("RequestTimeout", "OperationTimedOut", "timeout", "timed out", "408"),
    "client-timeout": ("timeout", "timed out", "Timeout"),
    "reset": ("reset", "Connection", "connection"),
    "ambiguous": ("Connection", "connection", "reset"),
    "refused": ("refused",),
}
# Words a failure must NOT contain: a throttled request is not an aborted upload.
MISLEADING: Mapping[str, tuple[str, ...]] = {
    "throttle-503": ("was aborted",),
    "throttle-429": ("was aborted",),
}

RENAME_OPERATIONS = ("rename_file", "rename_dir")


def fault_config(fault: StoreFault) -> dict[str, str]:
    """Settings a fault needs in its cell's config (a short read timeout for a stall)."""
    if fault.fault == "client-timeout" and fault.store == "s3":
        return {"outcommit.s3.connection.timeout": CLIENT_TIMEOUT}
    return {}


def proxy_rule(fault: StoreFault) -> Rule | None:
    """The proxy rule of an HTTP fault; None when the store has no such target or fault."""
    target = TARGETS.get(fault.store, {}).get(fault.target)
    action = ACTIONS.get(fault.store, {}).get(fault.fault)
    if target is None or action is None:
        return None
    return Rule(f"{fault.target}/{fault.fault}", action, method=target.get("method"),
                path=target.get("path"), query=target.get("query"), header=target.get("header"),
                times=fault.times)


@dataclass
class _Budget:
    """How many more matching operations may fail, shared by every operation's Fault."""

    left: int
    fired: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, operation: str, args: tuple[Any, ...]) -> bool:
        with self.lock:
            if self.left == 0:
                return False
            self.left -= 1
            self.fired += 1
            return True


def _ambiguous(message: str) -> BaseException:
    return ConnectionResetError(f"connection reset after the rename happened ({message})")


def _refused(message: str) -> BaseException:
    return PermissionError(f"rename refused by the store ({message})")


_WRAPPER_ERRORS: Mapping[str, tuple[str, Callable[[str], BaseException]]] = {
    "ambiguous": ("after", _ambiguous),
    "refused": ("before", _refused),
}


class Injector:
    """Arms and disarms one StoreFault around a phase, and says whether it fired."""

    def __init__(self, fault: StoreFault, proxy: FaultProxy | None,
                 wrapper: FaultInjectingStore | None) -> None:
        self.fault = fault
        self.proxy = proxy
        self.wrapper = wrapper
        self._rule: Rule | None = None
        self._budget: _Budget | None = None

    def arm(self) -> None:
        if self.fault.store == "rename":
            assert self.wrapper is not None
            when, error = _WRAPPER_ERRORS[self.fault.fault]
            self._budget = _Budget(self.fault.times)
            for operation in RENAME_OPERATIONS:
                self.wrapper.add(Fault(operation, when=when, times=-1, error=error,  # type: ignore[arg-type]
                                       predicate=self._budget))
            return
        rule = proxy_rule(self.fault)
        assert rule is not None and self.proxy is not None
        self._rule = self.proxy.add(rule)

    def disarm(self) -> None:
        if self.wrapper is not None:
            self.wrapper.faults.clear()
        if self.proxy is not None:
            self.proxy.clear()

    @property
    def fired(self) -> int:
        if self._budget is not None:
            return self._budget.fired
        return self._rule.fired if self._rule is not None else 0

    def describe(self) -> str:
        if self._rule is not None:
            return f"{self._rule.describe()} (matched {self._rule.matched}, fired {self._rule.fired})"
        return f"{self.fault.fault} rename fault, fired {self.fired}"


def wrap_for(fault: StoreFault, store: Store) -> FaultInjectingStore | None:
    """The wrapper a rename fault needs around the cell's store (None for HTTP faults)."""
    return FaultInjectingStore(store) if fault.store == "rename" else None
