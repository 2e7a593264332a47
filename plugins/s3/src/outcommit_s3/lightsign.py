"""Signature Version 4 for the light path's one request, CompleteMultipartUpload (issue 30).

Why: botocore's ``S3SigV4Auth.add_auth`` with ``AWSRequest.prepare()`` cost 0.063 ms of
client CPU per completion measured alone and 0.13 ms inside a job commit (two passes over
the headers through case-insensitive dictionaries, the URL split three times, four HMACs
to derive the day's key), a quarter of job commit's CPU per file; the same signature
computed here costs 0.010 ms alone (``docs/performance.md``, "The light path's signer").

What it is: the algorithm ``S3SigV4Auth`` runs for this request, and nothing else:

* the credentials are botocore's, frozen per attempt by the caller (a refreshing set
  renews itself there); a session token goes out as ``X-Amz-Security-Token``, signed;
* the payload's SHA-256 is always signed (``X-Amz-Content-SHA256``): botocore signs it
  for this request too, on HTTP and on HTTPS alike (no Content-MD5, no client config in
  its context);
* the canonical URI is the URL's path as sent, not normalised (S3's rule); the query
  string's pairs sorted as they appear in the URL; every header signed but those
  botocore leaves out (its ``SIGNED_HEADERS_BLACKLIST``, read from the installed
  botocore), plus the host as botocore derives it (lower case, IPv6 in brackets, the
  scheme's default port left out), values trimmed as SigV4 says;
* the day's signing key is derived once per (secret, day, region) and kept (a handful,
  under the secret's digest, not the secret: what it keeps signs for that day and region
  only, as the derived key does in botocore's signer per request).

``tests/plugins/s3/test_s3_light_sign.py`` holds it to botocore's own signer: for drawn
keys, upload ids, hosts, ports, tokens and headers, every header both produce is equal.
"""

from __future__ import annotations

import hashlib
import hmac
import threading
import time
from typing import Any
from urllib.parse import SplitResult, urlsplit

_ALGORITHM = "AWS4-HMAC-SHA256"
#: The ports a URL may leave out, by scheme (botocore signs none of them, as HTTP sends).
DEFAULT_PORTS = {"http": 80, "https": 443}
#: Derived keys kept at most (a day's key per secret and region; a rotation adds one).
_KEYS_KEPT = 8


def signed_host(url: str) -> str:
    """The host botocore signs for ``url`` (its ``_host_from_url``): lower case, an IPv6
    literal in brackets, the port only when it is not the scheme's default."""
    return _host(urlsplit(url))


def _host(parts: SplitResult) -> str:
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    port = parts.port
    if port is not None and port != DEFAULT_PORTS.get(parts.scheme):
        host = f"{host}:{port}"
    return host


def _trimmed(value: str) -> str:
    return " ".join(value.split())


class Signer:
    """Headers signed for one request: ``headers(...)`` returns what goes out."""

    def __init__(self, region: str, service: str = "s3") -> None:
        from botocore.auth import SIGNED_HEADERS_BLACKLIST

        self._region, self._service = region, service
        self._unsigned = frozenset(SIGNED_HEADERS_BLACKLIST)
        self._keys: dict[tuple[bytes, str], bytes] = {}
        self._lock = threading.Lock()

    def _key(self, secret: str, day: str) -> bytes:
        # Kept under the secret's digest, not the secret: a dump of the signer shows no secret key.
        kept = (hashlib.sha256(secret.encode()).digest(), day)
        with self._lock:
            key = self._keys.get(kept)
        if key is None:
            key = hmac.new(f"AWS4{secret}".encode(), day.encode(), hashlib.sha256).digest()
            for part in (self._region, self._service, "aws4_request"):
                key = hmac.new(key, part.encode(), hashlib.sha256).digest()
            with self._lock:
                if len(self._keys) >= _KEYS_KEPT:
                    self._keys.clear()  # yesterday's keys, a rotated secret's
                self._keys[kept] = key
        return key

    def headers(self, method: str, url: str, headers: dict[str, str], body: bytes, credentials: Any,
                timestamp: str | None = None) -> dict[str, str]:
        """``headers`` and the signature's (X-Amz-Date, X-Amz-Content-SHA256, a session
        token's, Authorization), as ``S3SigV4Auth.add_auth`` leaves them on the request."""
        stamp = timestamp or time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        day = stamp[:8]
        payload = hashlib.sha256(body).hexdigest()
        out = dict(headers)
        out["X-Amz-Date"] = stamp
        if credentials.token:
            out["X-Amz-Security-Token"] = credentials.token
        out["X-Amz-Content-SHA256"] = payload
        parts = urlsplit(url)
        path, query = parts.path, parts.query
        signed = {name.lower(): _trimmed(value) for name, value in out.items()
                  if name.lower() not in self._unsigned}
        signed.setdefault("host", _host(parts))
        names = sorted(signed)
        pairs = sorted(pair.partition("=")[::2] for pair in query.split("&")) if query else []
        canonical = "\n".join((
            method.upper(), path, "&".join(f"{k}={v}" for k, v in pairs),
            "".join(f"{name}:{signed[name]}\n" for name in names), ";".join(names), payload))
        scope = f"{day}/{self._region}/{self._service}/aws4_request"
        to_sign = f"{_ALGORITHM}\n{stamp}\n{scope}\n{hashlib.sha256(canonical.encode()).hexdigest()}"
        key = self._key(credentials.secret_key, day)
        signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
        out["Authorization"] = (f"{_ALGORITHM} Credential={credentials.access_key}/{scope}, "
                                f"SignedHeaders={';'.join(names)}, Signature={signature}")
        return out
