"""What a GCS store's client sends, seen through public hooks only: aiohttp's request
tracing (``aiohttp.TraceConfig``), which gcsfs takes through its documented
``session_kwargs`` (passed on to ``aiohttp.ClientSession``).

- Every HTTP request is counted, under Hadoop-like names (:func:`statistic`), retries
  included: they are requests the server answered.
- The rename probe's ``objects.move`` is asked once. gcsfs retries an answer of 5xx, 408
  or 429 for ~30 s (six attempts with backoff), and gcp-storage-emulator answers 501 to
  every move: the probe must learn that at once. A retryable answer to a move of a probe
  object (:data:`PROBE_MARKER` in its name) is raised as :class:`ProbeAnswered`, which
  gcsfs's retry loop does not catch (it retries HTTP and transport errors only).

This replaced an instance's ``_call`` swapped for a counting wrapper and a call of
``GCSFileSystem._request.__wrapped__`` (the request without its retry decorator): both
gcsfs internals. ``tests/plugins/gcs/test_gcs_rename.py`` pins the counts and the single
move of the probe, so a gcsfs that stopped honouring ``session_kwargs``, or retried
unknown exceptions, fails there.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

#: In the name of every object the rename probe writes (``GcsStore._probe``).
PROBE_MARKER = ".outcommit-probe-"

#: Answers gcsfs retries (``gcsfs.retry.errs``): 5xx, request timeout, too many requests.
RETRIED_STATUSES = frozenset({*range(500, 505), 408, 429})

# Requests by URL path and method, counted under Hadoop-like names.
_OPERATIONS = (("moveTo", "object_move_request"), ("rewriteTo", "object_copy_requests"),
               ("copyTo", "object_copy_requests"))


class ProbeAnswered(Exception):
    """The server's answer to a probe's move, past gcsfs's retries (``code``: the status)."""

    def __init__(self, code: int, url: str) -> None:
        super().__init__(f"{code} from {url}")
        self.code = code


def statistic(method: str, raw_path: str, query: dict[str, str]) -> str:
    """The name a request is counted under (Hadoop's where one exists). ``raw_path`` is the
    URL's path as sent (object names percent-encoded, '/' too: no name looks like a verb)."""
    for verb, name in _OPERATIONS:
        if f"/{verb}/" in raw_path:
            return name
    if "/upload/" in raw_path:
        return "object_put_request"
    if "/batch/storage" in raw_path:  # a batch of deletes (GcsStore.delete_many)
        return "object_bulk_delete_request"
    if method == "DELETE":
        return "object_delete_request"
    if method == "GET" and raw_path.rstrip("/").endswith("/o"):
        return "object_list_request"
    if method == "GET" and (query.get("alt") == "media" or "/download/" in raw_path):
        return "action_http_get_request"
    if method == "GET":
        return "object_metadata_request" if "/o/" in raw_path else "gcs_get"
    return f"gcs_{method.lower()}"


def trace_config(count: Callable[[str], None] | None) -> Any:
    """An ``aiohttp.TraceConfig`` that counts every request with ``count(name)`` (None: no
    counting) and asks a probe's move once (module docs). It pickles, as the filesystem
    whose ``session_kwargs`` hold it does: a copy in another process counts nothing (the
    counter is this process's store's)."""

    async def started(session: Any, context: Any, params: Any) -> None:
        if count is not None:
            count(statistic(params.method, params.url.raw_path, dict(params.url.query)))

    async def answered(session: Any, context: Any, params: Any) -> None:
        status, url = params.response.status, params.url
        if status in RETRIED_STATUSES and "/moveTo/" in url.raw_path and PROBE_MARKER in url.path:
            raise ProbeAnswered(status, str(url.with_query(None)))

    trace = _tracing_class()()
    trace.on_request_start.append(started)
    trace.on_request_end.append(answered)
    return trace


@functools.cache
def _tracing_class() -> type:
    import aiohttp  # gcsfs's own HTTP client: imported with the store's filesystem, not before

    class Tracing(aiohttp.TraceConfig):
        def __reduce__(self) -> tuple[Any, ...]:
            return trace_config, (None,)

    return Tracing
