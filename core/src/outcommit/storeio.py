"""The fsspec and network helpers under every store: the path a filesystem names by a URL,
one connection to a service's endpoint, and whether a failure is the service throttling.
Re-exported by ``outcommit.store``."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

import fsspec

_THROTTLE_MARKERS = ("SlowDown", "ServerBusy", "TooManyRequests", "Too Many Requests",
                     "503 Service Unavailable", "rateLimitExceeded")


def throttling(exc: BaseException) -> bool:
    """Is ``exc`` a service refusing a request under load (HTTP 503/429)? By its status
    where the SDK gives one, else by the service's own words in its message."""
    for attr in ("status", "status_code", "code", "http_status"):
        value = getattr(exc, attr, None)
        if value in (429, 503, "429", "503"):
            return True
    response = getattr(exc, "response", None)
    if response is not None and getattr(response, "status_code", None) in (429, 503):
        return True
    text = str(exc)
    return any(marker in text for marker in _THROTTLE_MARKERS)


def fs_path(fs: fsspec.AbstractFileSystem, url: str) -> str:
    """The path ``fs`` names by ``url``: its protocol stripped, normalised as ``fs`` does.

    fsspec has no public method for it on an instance: a filesystem's ``_strip_protocol``
    classmethod is the hook fsspec's implementers override, and the public
    ``fsspec.core.strip_protocol`` picks the class by the URL's own protocol (a path
    without one would be read as a local file's). So this is the one place outcommit
    calls the hook (tests/core/test_store.py pins what it answers).
    """
    return str(fs._strip_protocol(url))


def connect_once(url: str, timeout: float) -> None:
    """One TCP connection to the host and port of ``url`` (80/443 by its scheme), closed at
    once: stores probe their endpoint with it before the first request, so a wrong or
    closed one fails in seconds, not after the SDK's retries. Raises the ``OSError``."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    with socket.create_connection((parts.hostname or "", port), timeout=timeout):
        pass
