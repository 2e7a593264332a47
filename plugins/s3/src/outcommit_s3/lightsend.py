"""The light path's sender: its CompleteMultipartUpload on kept-alive ``http.client``
connections (issue 30).

Why: botocore's ``URLLib3Session.send`` cost 0.35-0.46 ms of client CPU per completion
(urllib3's pool, URL parsing and response object around ``http.client``), the same
request on a bare kept-alive ``http.client`` connection 0.18-0.20 ms
(``benchmarks/client_cpu.py``, path ``resigned``; docs/performance.md), job commit's
CPU per file being almost all that request.

What it keeps of ``URLLib3Session`` (``botocore/httpsession.py``):

* a pool per (scheme, host, port) of at most ``max_pool_connections`` idle kept-alive
  connections, urllib3's non-blocking way (beyond it a connection is made and closed
  after use), last in first out, closed with the store;
* a kept-alive connection the server closed while idle is seen before reuse (its socket
  readable: urllib3's ``is_connection_dropped``) and replaced, not sent on;
* the socket options (TCP_NODELAY, SO_KEEPALIVE), the connect timeout for the connect
  (and the request's write), the read timeout for the answer;
* TLS: botocore's ``create_urllib3_context``, verification against ``get_cert_path``'s
  bundle (``verify`` True: botocore's default, a path: that bundle, False: none), the
  server's name checked, SNI;
* its exceptions, for the same failures (``_raised``), which botocore's retry handlers
  and the store's translation read;
* the answer as ``botocore.awsrequest.AWSResponse`` (case-insensitive headers,
  ``content``).

What it hands to ``URLLib3Session`` as is: a URL a proxy applies to (the config's or the
environment's, as botocore resolves them), every request when a client certificate is
configured, a URL of another scheme.
"""

from __future__ import annotations

import errno
import http.client
import select
import socket
import ssl
import threading
from collections.abc import Callable
from typing import Any

from .lightsign import DEFAULT_PORTS

#: Errors writing the request after which urllib3 still reads the answer (a server may
#: answer, then close, before the whole request is written).
_SEND_IGNORED = (errno.EPIPE, errno.ECONNRESET, errno.EPROTOTYPE)


class _Failure(Exception):
    """Where a send failed (connect, TLS handshake, exchange), carried to ``_raised``."""

    def __init__(self, phase: str, error: BaseException) -> None:
        super().__init__(phase, error)
        self.phase, self.error = phase, error


class _Body:
    """The answer's bytes as urllib3's response gives them to ``AWSResponse.content``."""

    __slots__ = ("_data",)

    def __init__(self, data: bytes) -> None:
        self._data = data

    def stream(self, *_: Any, **__: Any) -> Any:
        yield self._data


class _Pool:
    """Idle kept-alive connections to one (scheme, host, port), thread-safe."""

    def __init__(self, make: Callable[[], http.client.HTTPConnection], size: int) -> None:
        self._make, self._size = make, max(1, size)
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self.closed = False
        #: Connections made, for tests and the docs' counts.
        self.made = 0

    def get(self) -> http.client.HTTPConnection:
        """An idle connection still open, else a new one not yet connected."""
        while True:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None:
                with self._lock:
                    self.made += 1
                return self._make()
            # The server closed it while idle (its FIN or an error is readable): sending
            # on it cost an error and a retry; urllib3's is_connection_dropped check.
            if conn.sock is None or _readable(conn.sock):
                conn.close()
                continue
            return conn

    def put(self, conn: http.client.HTTPConnection) -> None:
        """Kept for reuse, unless the pool is full (urllib3: discarded) or closed."""
        with self._lock:
            if not self.closed and len(self._idle) < self._size:
                self._idle.append(conn)
                return
        conn.close()

    def close(self) -> None:
        with self._lock:
            self.closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


def _readable(sock: socket.socket) -> bool:
    """Whether ``sock`` has something to read now: on an idle kept-alive connection, the
    server's end of stream or an error (urllib3's ``wait_for_read(sock, timeout=0)``)."""
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(0))


class _HTTP(http.client.HTTPConnection):
    """A connection with botocore's socket options (TCP_NODELAY, SO_KEEPALIVE), which
    writes a request's headers and its body in one ``send``, as botocore's ``AWSConnection``
    writes them: ``http.client`` writes them in two, two system calls and two TCP segments
    per completion (TCP_NODELAY), client CPU issue 30 counts."""

    socket_options: list[Any] = []
    _joined: bytes | None = None

    def endheaders(self, message_body: Any = None, *, encode_chunked: bool = False) -> None:
        if isinstance(message_body, bytes) and not encode_chunked:
            self._joined = message_body  # sent with the headers, by send() below
            message_body = None
        try:
            super().endheaders(message_body, encode_chunked=encode_chunked)
        finally:
            self._joined = None

    def send(self, data: Any) -> None:
        body, self._joined = self._joined, None
        super().send(data + body if body else data)

    def connect(self) -> None:
        try:
            self.sock = socket.create_connection((self.host, self.port), self.timeout)
            for option in self.socket_options:
                self.sock.setsockopt(*option)
        except Exception as exc:
            raise _Failure("connect", exc) from exc


class _HTTPS(_HTTP):
    """A TLS connection: the handshake against the shared context, SNI, the name checked."""

    context: ssl.SSLContext
    default_port = 443  # the Host header names no port for 443, as the signer signed it

    def connect(self) -> None:
        super().connect()
        try:
            self.sock = self.context.wrap_socket(self.sock, server_hostname=self.host)
        except Exception as exc:
            raise _Failure("tls", exc) from exc


def tls_context(verify: Any) -> ssl.SSLContext:
    """botocore's context for ``verify`` (its ``_setup_ssl_cert`` and urllib3's wrap):
    the bundle loaded once, not at each connect as urllib3 loads it."""
    from botocore.httpsession import create_urllib3_context, get_cert_path

    context: ssl.SSLContext = create_urllib3_context()
    if verify:
        context.verify_mode = ssl.CERT_REQUIRED
        context.check_hostname = True
        context.load_verify_locations(cafile=get_cert_path(verify))
    else:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


class _Manager:
    """The pools by origin (``scheme://host:port``), as urllib3's ``PoolManager`` keeps
    them: one per origin, made on first use, all closed by ``clear``."""

    def __init__(self) -> None:
        self.pools: dict[str, _Pool] = {}
        self._lock = threading.Lock()
        self._cleared = False

    def pool(self, origin: str, make: Callable[[], http.client.HTTPConnection], size: int) -> _Pool:
        with self._lock:
            pool = self.pools.get(origin)
            if pool is None:
                pool = _Pool(make, size)
                if self._cleared:
                    # A send after (or racing) the store's close: served, but by a pool
                    # that keeps nothing, so no socket outlives the close.
                    pool.close()
                else:
                    self.pools[origin] = pool
            return pool

    def clear(self) -> None:
        """Every pool's idle connections closed (those in use close on their return), and
        no connection kept by a send that comes after."""
        with self._lock:
            self._cleared = True
            pools = list(self.pools.values())
            self.pools.clear()
        for pool in pools:
            pool.close()


class Sender:
    """``send(request)`` as ``URLLib3Session.send`` answers it, on its own pools."""

    def __init__(self, *, verify: Any = True, timeout: tuple[float, float] = (60, 60),
                 max_pool_connections: int = 10, socket_options: list[tuple[int, int, int]] | None = None,
                 proxies: dict[str, str] | None = None, proxies_config: dict[str, Any] | None = None,
                 client_cert: Any = None) -> None:
        """``URLLib3Session``'s arguments, which it is also made with."""
        from botocore.httpsession import ProxyConfiguration, URLLib3Session

        #: The URLLib3Session that takes what this sender does not (proxies, client certs).
        self.fallback = URLLib3Session(
            verify=verify, timeout=timeout, max_pool_connections=max_pool_connections,
            socket_options=socket_options, proxies=proxies, proxies_config=proxies_config,
            client_cert=client_cert)
        self._verify, self._size, self._timeouts = verify, max_pool_connections, timeout
        self._socket_options: list[Any] = list(socket_options or [])
        self._proxies = ProxyConfiguration(proxies=proxies, proxies_settings=proxies_config)
        self._client_cert = client_cert
        self._context: ssl.SSLContext | None = None
        self._manager = _Manager()
        #: Origins the fallback takes (a proxy applies, a client certificate...).
        self._handed: set[str] = set()

    def close(self) -> None:
        """Its pools closed, and the fallback's (the store's close)."""
        self._manager.clear()
        self.fallback.close()

    def send(self, request: Any) -> Any:
        url = request.url
        scheme, _, rest = url.partition("://")
        netloc, slash, path = rest.partition("/")
        origin = f"{scheme}://{netloc}"
        try:
            pool = None if origin in self._handed else (
                self._manager.pools.get(origin) or self._pool(origin, url))
        except _Failure as exc:  # the CA bundle unreadable: botocore's SSLError, retried
            raise _raised(exc, url, request) from None
        # A per-request read timeout (botocore's request context): URLLib3Session's own.
        if pool is None or (getattr(request, "context", None) or {}).get("read_timeout") is not None:
            return self.fallback.send(request)
        target = slash + path if slash else "/"
        try:
            return self._exchange(pool, request, target)
        except Exception as exc:
            raise _raised(exc, url, request) from None

    def _pool(self, origin: str, url: str) -> _Pool | None:
        """The origin's pool, made on first use; None for the fallback's origins: a proxy
        applies (botocore's resolution), a client certificate, a scheme not HTTP(S)."""
        from urllib.parse import urlsplit

        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        if (scheme not in DEFAULT_PORTS or not parts.hostname or self._client_cert
                or self._proxies.proxy_url_for(url)):
            self._handed.add(origin)
            return None
        host, port = parts.hostname, parts.port or DEFAULT_PORTS[scheme]
        connect, options = self._timeouts[0], self._socket_options
        if scheme == "https":
            if self._context is None:
                try:
                    self._context = tls_context(self._verify)
                except Exception as exc:  # urllib3 loads it at each connect: its SSLError
                    raise _Failure("bundle", exc) from exc
            context = self._context

            def make() -> http.client.HTTPConnection:
                conn = _HTTPS(host, port, timeout=connect)
                conn.socket_options, conn.context = options, context
                return conn
        else:
            def make() -> http.client.HTTPConnection:
                conn = _HTTP(host, port, timeout=connect)
                conn.socket_options = options
                return conn
        return self._manager.pool(origin, make, self._size)

    def _exchange(self, pool: _Pool, request: Any, target: str) -> Any:
        """The answer on a pooled connection, read whole; the connection back in the pool
        when the server keeps it (any failure: closed, as urllib3 discards it)."""
        from botocore.awsrequest import AWSResponse

        conn = pool.get()
        connect, read = self._timeouts
        try:
            fresh = conn.sock is None
            if fresh:
                conn.connect()  # errors: _Failure("connect"/"tls")
            if fresh or connect != read:  # a kept connection still has the read timeout
                conn.sock.settimeout(connect)
            try:
                conn.request(request.method, target, body=request.body, headers=request.headers)
            except OSError as exc:
                if exc.errno not in _SEND_IGNORED or isinstance(exc, ssl.SSLError):
                    raise _Failure("send", exc) from exc
            if connect != read:  # a system call each: botocore's two timeouts are most often one
                conn.sock.settimeout(read)
            response = conn.getresponse()
            whole = True
            try:
                data = response.read()
            except http.client.IncompleteRead as cut:
                if response.chunked:  # urllib3 reads the chunks itself: ProtocolError, whatever
                    raise  # came (botocore's ConnectionClosedError), not a 200 of part of a body
                data, whole = cut.partial, False  # urllib3, enforce_content_length=False
            headers: dict[str, str] = {}
            for name, value in response.getheaders():
                lower = name.lower()  # repeated headers joined, as urllib3's HTTPHeaderDict
                headers[lower] = f"{headers[lower]}, {value}" if lower in headers else value
        except BaseException:
            conn.close()
            raise
        # A body cut short: the stream is unusable. An interim answer (102, 103: what
        # http.client returns as the answer, as urllib3 does): the final one is still owed on
        # this connection, and the next request sent on it would read it as its own.
        if response.will_close or not whole or response.status < 200:
            conn.close()
        else:
            pool.put(conn)
        answer = AWSResponse(request.url, response.status, headers, _Body(data))
        # Its headers as read, lower-cased: what the answer's parse reads (``light.parse_answer``),
        # without going through HeadersDict's case-insensitive keys again (3-4 us per answer).
        answer.lower_headers = headers
        return answer


def _raised(exc: Exception, url: str, request: Any) -> Any:
    """botocore's exception for ``exc``, the one ``URLLib3Session.send`` raises for the
    same failure (through urllib3's): retry conditions and the store read the class."""
    from botocore.exceptions import (
        ConnectionClosedError,
        ConnectTimeoutError,
        EndpointConnectionError,
        HTTPClientError,
        ReadTimeoutError,
        SSLError,
    )

    phase, error = (exc.phase, exc.error) if isinstance(exc, _Failure) else ("exchange", exc)
    if phase == "bundle":  # urllib3's ssl_wrap_socket: any error loading it an SSLError
        return SSLError(endpoint_url=url, error=error)
    if phase == "connect":  # urllib3: ConnectTimeoutError, else NewConnectionError
        if isinstance(error, TimeoutError):
            return ConnectTimeoutError(endpoint_url=url, error=error)
        if isinstance(error, OSError):
            return EndpointConnectionError(endpoint_url=url, error=error)
        return HTTPClientError(error=error)
    if phase == "send" and not isinstance(error, ssl.SSLError):  # urllib3: ProtocolError
        return ConnectionClosedError(error=error, request=request, endpoint_url=url)
    timed_out = isinstance(error, TimeoutError) or (
        isinstance(error, ssl.SSLError) and "timed out" in str(error))
    if timed_out:  # the handshake's too: urllib3's _raise_timeout makes it a read timeout
        return ReadTimeoutError(endpoint_url=url, error=error)
    if isinstance(error, (ssl.SSLError, ssl.CertificateError)):
        return SSLError(endpoint_url=url, error=error)
    if isinstance(error, (OSError, http.client.HTTPException)):  # urllib3's ProtocolError
        return ConnectionClosedError(error=error, request=request, endpoint_url=url)
    return HTTPClientError(error=error)
