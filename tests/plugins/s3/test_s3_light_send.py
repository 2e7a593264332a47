"""The light path's sender (``outcommit_s3.lightsend``): CompleteMultipartUpload on its
own kept-alive ``http.client`` connections must fail, retry and close as botocore's
``URLLib3Session`` does. Against the moto server and the fault proxy; each test runs the
light path and botocore's (``outcommit.s3.light-requests=false``) and asserts the same
outcome.
"""

from __future__ import annotations

import os
import socket
import socketserver
import ssl
import threading
from typing import Any

import pytest
from test_s3_light_requests import COMPLETE, LIGHT, _pending, _self_signed, _upload

import outcommit
from outcommit_devtools.faultproxy import FaultProxy, Rule, close_after, reset, respond
from outcommit_devtools.sparkcluster import wait_until

PATHS = ("true", "false")  # the light path, botocore's
FEW_ATTEMPTS = {"outcommit.s3.retry.max-attempts": "2", "outcommit.retry.attempts": "1"}


def _attempts(store: Any) -> list[int]:
    """The completion's attempts, as botocore's retry handlers see them (``needs-retry``
    fires after each, on both paths)."""
    seen: list[int] = []
    store.client.meta.events.register("needs-retry.s3.CompleteMultipartUpload",
                                      lambda attempts, **_: seen.append(attempts))
    return seen


def _failure(raised: BaseException, upload: str, *urls: str) -> tuple[str, str, str]:
    """What a caller sees of a failed completion: the class, the message and its cause's
    class (botocore's exception), the upload id, endpoints' URLs and path's name masked."""
    text = str(raised).replace(upload, "UPLOAD")
    for url in urls:
        text = text.replace(url, "URL")
    return type(raised).__name__, text.replace("-true", "-LIGHT").replace("-false", "-LIGHT"), \
        type(raised.__cause__ or raised.__context__).__name__


def test_a_refused_connection_fails_as_on_botocores_path(s3_config, s3_root):
    """Nothing listens at the endpoint: botocore's EndpointConnectionError, retried, then
    the store's error; the upload is still there to complete or abort."""
    outcomes = []
    for light in PATHS:
        _, path, mp, upload, etags = _pending(s3_root, {**s3_config, LIGHT: light}, f"/refused-{light}.bin")
        with socket.socket() as bound:  # bound, not listening: every connect is refused
            bound.bind(("127.0.0.1", 0))
            endpoint = f"http://127.0.0.1:{bound.getsockname()[1]}"
            config = {**s3_config, LIGHT: light, "outcommit.s3.endpoint": endpoint, **FEW_ATTEMPTS,
                      "outcommit.s3.connection.probe": "false"}  # the store opens; its requests fail
            other = outcommit.open_store(s3_root, config)
            attempts = _attempts(other)
            with pytest.raises(Exception) as raised:
                other.multipart().complete(path, upload, etags)
        outcomes.append((_failure(raised.value, upload, endpoint), attempts, mp.is_pending(path, upload)))
        assert mp.abort(path, upload)
    assert outcomes[0] == outcomes[1]
    assert "Could not connect to the endpoint URL" in outcomes[0][0][1]  # botocore's EndpointConnectionError
    assert outcomes[0][1:] == ([1, 2], True)


@pytest.mark.parametrize("times", [1, -1], ids=["once", "always"])
def test_a_reset_before_the_answer_ends_as_on_botocores_path(times, s3_server, s3_config, s3_root):
    """The connection reset before the request reaches the server: botocore's
    ConnectionClosedError, retried; once, the retry completes; always, the same error."""
    outcomes = []
    for light in PATHS:
        with FaultProxy(s3_server.endpoint_url) as proxy:
            config = {**s3_config, LIGHT: light, "outcommit.s3.endpoint": proxy.url, **FEW_ATTEMPTS}
            store, path, mp, upload, etags = _pending(s3_root, config, f"/reset-{light}.bin")
            attempts = _attempts(store)
            rule = proxy.add(Rule("reset", reset(), **COMPLETE, times=times))
            try:
                done: Any = mp.complete(path, upload, etags) == store.info(path).etag
            except Exception as exc:  # the same on both paths, asserted below
                done = _failure(exc, upload, proxy.url)
            outcomes.append((done, attempts, rule.fired, mp.is_pending(path, upload)))
    assert outcomes[0] == outcomes[1]
    if times == 1:
        assert outcomes[0] == (True, [1, 2], 1, False)
    else:
        assert "Connection was closed before we received a valid response" in outcomes[0][0][1]
        assert outcomes[0][1:] == ([1, 2], 2, True)  # botocore's ConnectionClosedError, retried


def test_a_connection_the_server_closed_while_idle_is_not_sent_on(s3_server, s3_config, s3_root):
    """S3 closes a kept-alive connection idle too long. The next completion must see that
    before sending (as urllib3 does) and connect anew: one attempt, one request at the
    server, no error and no retry."""
    outcomes = []
    for light in PATHS:
        with FaultProxy(s3_server.endpoint_url) as proxy:
            config = {**s3_config, LIGHT: light, "outcommit.s3.endpoint": proxy.url}
            store, path, mp, upload, etags = _pending(s3_root, config, f"/idle-{light}-1.bin")
            second = store.strip(s3_root) + f"/idle-{light}-2.bin"
            _, upload2, etags2 = _upload(store, second)
            closing = proxy.add(Rule("idle", close_after(), **COMPLETE, times=1))
            mp.complete(path, upload, etags)
            # The server has closed that connection (its FIN sent) before the next completion.
            wait_until(lambda p=proxy: p.closed_after == 1, 30.0, "the proxy to close the connection")
            attempts = _attempts(store)
            etag = mp.complete(second, upload2, etags2)
            outcomes.append((etag == store.info(second).etag, attempts, closing.fired, closing.matched))
    assert outcomes[0] == outcomes[1]
    assert outcomes[0] == (True, [1], 1, 2)  # the second completion: one attempt, one request


def _established_to(port: int) -> int:
    """TCP connections established to ``port`` on this host (the kernel's table: the
    sockets really open, whatever Python objects still hold them)."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as lines:
            next(lines)
            for line in lines:
                fields = line.split()
                count += int(fields[2].rsplit(":", 1)[1], 16) == port and fields[3] == "01"
    return count


@pytest.mark.skipif(not os.path.exists("/proc/net/tcp"), reason="counts sockets in Linux's /proc")
def test_the_store_closes_every_connection_of_the_light_path(s3_server, s3_config, s3_root):
    """store.close(): no socket of the light path's pool is left open (counted at the OS:
    the connections to the endpoint, which keeps them alive)."""
    with FaultProxy(s3_server.endpoint_url) as proxy:
        config = {**s3_config, LIGHT: "true", "outcommit.s3.endpoint": proxy.url}
        store, path, mp, upload, etags = _pending(s3_root, config, "/sockets.bin")
        port = int(proxy.url.rsplit(":", 1)[1])
        before = _established_to(port)  # botocore's client's (the upload's), closed by the store too
        mp.complete(path, upload, etags)
        sender = store.client.light._http
        pools = list(sender._manager.pools.values())
        assert len(pools) == 1 and pools[0].made == 1 and _established_to(port) == before + 1
        late_path = path[:-len("sockets.bin")] + "late.bin"
        late_upload, late_etags = mp.initiate(late_path), []
        late_etags.append(mp.upload_part(late_path, late_upload, 1, b"late"))
        client = store.client  # what a job commit's thread holds when the store is closed
        store.close()
        assert _established_to(port) == 0
        assert not sender._manager.pools
        # A completion sent on it after the close is served, and keeps no socket open behind it.
        bucket, key = late_path.split("/", 1)
        client.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=late_upload, MultipartUpload={
            "Parts": [{"PartNumber": 1, "ETag": late_etags[0]}]})
        assert client.light._http is sender and _established_to(port) == 0
        assert not sender._manager.pools
        assert store.read_bytes(late_path) == b"late"


@pytest.mark.parametrize("light", PATHS)
def test_no_proxy_keeps_the_completion_off_the_proxy(light, monkeypatch, s3_server, s3_config, s3_root):
    """HTTP_PROXY with NO_PROXY naming the endpoint's host: botocore sends direct, so
    must the light path (its sender asks botocore's proxy resolution); without NO_PROXY
    the light path goes through it (``test_a_proxied_completion_goes_through_botocores_session``)."""
    with FaultProxy(s3_server.endpoint_url) as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        monkeypatch.setenv("http_proxy", proxy.url)
        monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
        monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
        store, path, mp, upload, etags = _pending(s3_root, {**s3_config, LIGHT: light}, "/direct.bin")
        seen = proxy.add(Rule("seen", respond(200, b""), **COMPLETE, skip=1 << 30))  # counts, never fires
        etag = mp.complete(path, upload, etags)
    assert seen.matched == 0
    assert store.info(path).etag == etag


def test_a_proxied_completion_goes_through_botocores_session(monkeypatch, s3_server, s3_config, s3_root):
    """HTTP_PROXY as botocore's endpoint honours it: the completion reaches S3 through it,
    the sender handing it to URLLib3Session (its proxy managers), not to a pool of its own."""
    with FaultProxy(s3_server.endpoint_url) as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        monkeypatch.setenv("http_proxy", proxy.url)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        store, path, mp, upload, etags = _pending(s3_root, {**s3_config, LIGHT: "true"}, "/proxied.bin")
        seen = proxy.add(Rule("seen", respond(200, b""), **COMPLETE, skip=1 << 30))
        assert mp.complete(path, upload, etags) == store.info(path).etag
    sender = store.client.light._http
    assert seen.matched == 1 and not sender._manager.pools
    assert len(sender.fallback._proxy_managers) == 1  # its proxy manager sent it


def test_a_certificate_of_another_ca_fails_as_on_botocores_path(monkeypatch, tmp_path, s3_server, s3_config,
                                                                s3_root):
    """The endpoint's certificate is not signed by the CA given (REQUESTS_CA_BUNDLE):
    botocore's SSLError on both paths, the same message; nothing completed."""
    cert_file, key_file = _self_signed(tmp_path)
    (tmp_path / "other").mkdir()
    other_ca, _ = _self_signed(tmp_path / "other")
    outcomes = []
    for light in PATHS:
        with FaultProxy(s3_server.endpoint_url) as proxy:
            _, path, mp, upload, etags = _pending(s3_root, {**s3_config, LIGHT: light}, f"/tls-{light}.bin")
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(cert_file, key_file)
            proxy._server.socket = context.wrap_socket(proxy._server.socket, server_side=True)
            monkeypatch.setenv("REQUESTS_CA_BUNDLE", other_ca)
            monkeypatch.delenv("AWS_CA_BUNDLE", raising=False)
            endpoint = proxy.url.replace("http://", "https://")
            config = {**s3_config, LIGHT: light, "outcommit.s3.endpoint": endpoint, **FEW_ATTEMPTS}
            with pytest.raises(Exception) as raised:
                outcommit.open_store(s3_root, config).multipart().complete(path, upload, etags)
            monkeypatch.delenv("REQUESTS_CA_BUNDLE")
            outcomes.append((_failure(raised.value, upload, endpoint), mp.is_pending(path, upload)))
            assert mp.abort(path, upload)
    assert outcomes[0] == outcomes[1]
    assert "SSL validation failed" in outcomes[0][0][1]  # botocore's SSLError
    assert "CERTIFICATE_VERIFY_FAILED" in outcomes[0][0][1] and outcomes[0][1]


def test_a_ca_bundle_that_cannot_be_read_fails_as_on_botocores_path(monkeypatch, tmp_path, s3_server,
                                                                     s3_config, s3_root):
    """REQUESTS_CA_BUNDLE names a file that is not there (a driver's image without the
    CA its workers had): botocore's SSLError on both paths, the store's TLS error naming
    the fix, retried alike; the upload still pending. The light path raised the bare
    FileNotFoundError of loading the bundle, which the store read as no TLS error."""
    cert_file, key_file = _self_signed(tmp_path)
    outcomes = []
    for light in PATHS:
        with FaultProxy(s3_server.endpoint_url) as proxy:
            _, path, mp, upload, etags = _pending(s3_root, {**s3_config, LIGHT: light},
                                                  f"/bundle-{light}.bin")
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(cert_file, key_file)
            proxy._server.socket = context.wrap_socket(proxy._server.socket, server_side=True)
            monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(tmp_path / "missing.pem"))
            monkeypatch.delenv("AWS_CA_BUNDLE", raising=False)
            endpoint = proxy.url.replace("http://", "https://")
            config = {**s3_config, LIGHT: light, "outcommit.s3.endpoint": endpoint, **FEW_ATTEMPTS,
                      "outcommit.s3.connection.probe": "false"}
            other = outcommit.open_store(s3_root, config)
            attempts = _attempts(other)
            with pytest.raises(Exception) as raised:
                other.multipart().complete(path, upload, etags)
            monkeypatch.delenv("REQUESTS_CA_BUNDLE")
            outcomes.append((_failure(raised.value, upload, endpoint), attempts, mp.is_pending(path, upload)))
            assert mp.abort(path, upload)
    assert outcomes[0] == outcomes[1]
    assert "SSL validation failed" in outcomes[0][0][1]  # botocore's SSLError
    assert "no TLS connection" in outcomes[0][0][1]  # the store's TLS error, naming the fix
    assert outcomes[0][1:] == ([1, 2], True)


class _Canned(socketserver.ThreadingTCPServer):
    """A loopback HTTP/1.1 server answering every request with ``answer``'s raw bytes
    (then closing the connection when ``close``), keeping each request as it came: the
    wire both senders write and read, compared byte for byte."""

    daemon_threads = True
    request_queue_size = 128  # 64 threads connecting at once: none refused by a full backlog

    def __init__(self, answer: bytes, close: bool = False, family: int = socket.AF_INET) -> None:
        self.address_family = family
        super().__init__(("::1" if family == socket.AF_INET6 else "127.0.0.1", 0), _Handler)
        self.answer, self.close, self.requests = answer, close, []  # type: ignore[var-annotated]
        self.gate = threading.Event()  # answers wait for it once cleared
        self.gate.set()
        threading.Thread(target=self.serve_forever, daemon=True).start()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.server_close()

    def url(self, path: str) -> str:
        host, port = self.server_address[:2]
        return f"http://{f'[{host}]' if ':' in host else host}:{port}{path}"


class _Handler(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        server: Any = self.server
        while request := _read_request(self.rfile):
            server.requests.append(request)
            server.gate.wait()
            self.wfile.write(server.answer)
            if server.close:
                return


def _read_request(rfile: Any) -> bytes:
    """The next request's bytes, head and body; b"" once the client has closed."""
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        line = rfile.readline()
        if not line:
            return b""
        head += line
    length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    return head + rfile.read(length)


def _both(url: str) -> list[tuple[Any, ...]]:
    """What botocore's URLLib3Session and the light path's Sender each answer to the
    same signed request: (status, headers, body) or (the exception's class,)."""
    from botocore.awsrequest import AWSRequest
    from botocore.httpsession import URLLib3Session

    from outcommit_s3.lightsend import Sender

    answers: list[tuple[Any, ...]] = []
    for session in (URLLib3Session(timeout=(5, 5)), Sender(max_pool_connections=4, timeout=(5, 5))):
        request = AWSRequest(method="POST", url=url, data=b"<CompleteMultipartUpload/>",
                             headers={"Content-Type": "application/xml", "User-Agent": "outcommit"})
        try:
            response = session.send(request.prepare())
            answers.append((response.status_code, {k.lower(): v for k, v in response.headers.items()},
                            response.content))
        except Exception as exc:
            answers.append((type(exc).__name__,))
        finally:
            session.close()
    return answers


_RESULT = (b'<?xml version="1.0" encoding="UTF-8"?>\n<CompleteMultipartUploadResult>'
           b'<ETag>"e-1"</ETag></CompleteMultipartUploadResult>')


def test_a_chunked_answer_cut_short_fails_as_on_botocores_path():
    """S3 answers a slow completion 200, whitespace, then the XML, chunked. Cut before
    its last chunk, urllib3 raises (botocore's ConnectionClosedError, retried); the light
    path took the bytes it had as the answer."""
    cut = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n  \r\n%x\r\n%s\r\n" % (
        len(_RESULT), _RESULT)
    with _Canned(cut, close=True) as server:
        answers = _both(server.url("/bucket/key?uploadId=u"))
    assert answers == [("ConnectionClosedError",)] * 2


@pytest.mark.parametrize("answer", [
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nx-amz-id-2: a\r\nX-Amz-Id-2: b\r\n\r\n"
    b"2\r\n  \r\n%x\r\n%s\r\n0\r\n\r\n" % (len(_RESULT), _RESULT),
    b"HTTP/1.0 200 OK\r\n\r\n" + _RESULT,  # no length: read to the end of the stream
], ids=["chunked", "http-1.0"])
def test_answers_read_as_botocores_session_reads_them(answer):
    """Chunked, repeated headers (joined as urllib3 joins them), an HTTP/1.0 answer
    ending with the stream: the same status, headers and body."""
    with _Canned(answer, close=True) as server:
        answers = _both(server.url("/bucket/key?uploadId=u"))
    assert answers[0] == answers[1] and answers[0][0] == 200


def test_a_body_cut_short_of_its_length_reads_as_a_failure():
    """Content-Length promised more than came: the sender keeps the bytes that came, as
    newer botocore's session does (enforce_content_length=False; the minimum, 1.35.2,
    raises ConnectionClosedError: both retried), and the light path reads them as a
    failure (a 500, retried), never as a completion."""
    from outcommit_s3.light import parse_answer

    cut = _RESULT[:-len(b"</CompleteMultipartUploadResult>")]
    with _Canned(b"HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n" + cut, close=True) as server:
        answer = _both(server.url("/bucket/key?uploadId=u"))[1]
    assert answer[0] == 200 and answer[2] == cut
    parsed = parse_answer(*answer)
    assert parsed["Error"]["Code"] == "InternalError" and parsed["ResponseMetadata"]["HTTPStatusCode"] == 500


@pytest.mark.parametrize("family", [socket.AF_INET, socket.AF_INET6], ids=["ipv4", "ipv6"])
def test_the_request_goes_out_byte_for_byte_as_botocores_session_sends_it(family):
    """Keys botocore quotes (space, %, +, ?, #, unicode), empty segments, a trailing
    slash; an IPv6 literal host and a non-default port: the same request line, Host
    header (the one signed), Content-Length and body, no header twice."""
    if family == socket.AF_INET6 and not socket.has_ipv6:
        pytest.skip("no IPv6")
    from urllib.parse import quote

    key = quote("dir//a b%+?#é/", safe="/~")
    with _Canned(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", family=family) as server:
        answers = _both(server.url(f"/bucket/{key}?uploadId=a%2Bb"))
        botocore, light = server.requests
    assert answers[0] == answers[1]
    lines = light.split(b"\r\n")
    assert botocore == light
    names = [line.split(b":")[0].lower() for line in lines[1:] if b":" in line]
    assert len(names) == len(set(names)) and lines[0].startswith(f"POST /bucket/{key}?".encode())


@pytest.mark.parametrize("origin", ["http://127.0.0.1", "HTTP://LocalHost", "http://User:Pw@localhost"],
                         ids=["ip", "upper-case", "userinfo"])
def test_the_request_goes_out_as_it_was_signed(origin):
    """The signer signs the host botocore derives from the URL (lower case, no userinfo)
    and the URL's path unnormalised (S3's rule: ``.``, ``..``, ``//`` and ``~`` are part of
    the key); the request line and Host header the sender writes must be exactly those,
    or S3 answers SignatureDoesNotMatch (or serves another key than the one signed)."""
    from urllib.parse import quote, urlsplit

    from botocore.awsrequest import AWSRequest
    from botocore.credentials import ReadOnlyCredentials

    from outcommit_s3.lightsend import Sender
    from outcommit_s3.lightsign import Signer, signed_host

    key = quote("a~b/./c/../..//d/.", safe="/~")
    with _Canned(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n") as server:
        url = f"{origin}:{server.server_address[1]}/bucket/{key}?uploadId=a%2Bb"
        headers = Signer("us-east-1").headers("POST", url, {}, b"<x/>", ReadOnlyCredentials("AK", "S", None))
        sender = Sender(max_pool_connections=4, timeout=(5, 5))
        try:
            assert sender.send(AWSRequest(method="POST", url=url, data=b"<x/>", headers=headers).prepare()
                               ).status_code == 200
        finally:
            sender.close()
        line, *rest = server.requests[0].split(b"\r\n")
    signed = headers["Authorization"].partition("SignedHeaders=")[2].partition(",")[0].split(";")
    assert "host" in signed  # the host header is signed: the one sent must be the one derived
    parts = urlsplit(url)
    assert line == f"POST {parts.path}?{parts.query} HTTP/1.1".encode()
    assert [h for h in rest if h.lower().startswith(b"host:")] == [f"Host: {signed_host(url)}".encode()]


class _Interim(socketserver.StreamRequestHandler):
    """Answers the first request 102 Processing at once and its final answer only once
    a second request has come on the same connection (a slow completion); then the
    second's. ``server.finals`` holds the two final answers."""

    def handle(self) -> None:
        server: Any = self.server
        if not _read_request(self.rfile):
            return
        self.wfile.write(b"HTTP/1.1 102 Processing\r\n\r\n")
        self.wfile.flush()
        if _read_request(self.rfile):  # the client sent its next request on this connection
            self.wfile.write(server.finals[0] + server.finals[1])


def test_a_connection_owing_a_final_answer_is_not_reused():
    """An interim (1xx) answer other than 100 Continue is what ``http.client`` returns
    as the answer. The connection still owes the final one: pooled, the next
    completion sent on it read the previous one's answer (another key's ETag) as its own."""
    from botocore.awsrequest import AWSRequest

    from outcommit_s3.lightsend import Sender

    finals = [b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body) for body in (
        _RESULT, _RESULT.replace(b"e-1", b"e-2"))]
    with _Canned(b"") as server:
        server.RequestHandlerClass, server.finals = _Interim, finals  # type: ignore[attr-defined]
        sender = Sender(max_pool_connections=4, timeout=(5, 5))
        answers = []
        for key in ("a", "b"):
            request = AWSRequest(method="POST", url=server.url(f"/bucket/{key}?uploadId=u"), data=b"<x/>")
            response = sender.send(request.prepare())
            answers.append((response.status_code, response.content))
        sender.close()
    # Each on its own connection, as botocore's session returns it (the light path: a 500,
    # retried); the second completion must never read the first one's ETag.
    assert answers == [(102, b"")] * 2


@pytest.mark.skipif(not os.path.exists("/proc/net/tcp"), reason="counts sockets in Linux's /proc")
def test_64_threads_share_the_pool_and_close_leaves_no_socket():
    """64 threads completing at once: each gets an answer, at most the pool's size of
    connections stay open after, none leaks; closed while 64 completions are in flight,
    each connection coming back is closed, not pooled (counted at the kernel)."""
    from concurrent.futures import ThreadPoolExecutor

    from botocore.awsrequest import AWSRequest

    from outcommit_s3.lightsend import Sender

    with _Canned(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok") as server:
        port, sender = server.server_address[1], Sender(max_pool_connections=4, timeout=(5, 5))

        def send(_: int) -> bytes:
            request = AWSRequest(method="POST", url=server.url("/bucket/key?uploadId=u"), data=b"<x/>")
            return sender.send(request.prepare()).content

        with ThreadPoolExecutor(64) as threads:
            assert set(threads.map(send, range(640))) == {b"ok"}
            assert _established_to(port) <= 4  # the pool's idle ones, the rest closed
            server.gate.clear()  # the next 64 answers wait: all in flight at close()
            requests = len(server.requests)
            flying = [threads.submit(send, i) for i in range(64)]
            wait_until(lambda: len(server.requests) == requests + 64, 30.0, "64 requests in flight")
            pools = list(sender._manager.pools.values())  # held: a pooled socket is not closed by GC
            sender.close()
            server.gate.set()
            assert {future.result() for future in flying} == {b"ok"}
        assert _established_to(port) == 0 and pools[0].closed


class _Stalled(socketserver.StreamRequestHandler):
    """Answers the first request on a connection with half its body, the rest only once
    ``server.gate`` is set (a read that times out); later ones whole, each its own."""

    def handle(self) -> None:
        server: Any = self.server
        while request := _read_request(self.rfile):
            body = request.split(b"\r\n\r\n", 1)[1]
            answer = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
            if not server.requests:
                server.requests.append(request)
                self.wfile.write(answer[:-3])
                self.wfile.flush()
                server.gate.wait()
                answer = answer[-3:]
            self.wfile.write(answer)


def test_a_connection_that_failed_mid_answer_is_never_reused():
    """A read timeout in the middle of a body: botocore's ReadTimeoutError, and the
    connection closed with the rest unread; the next completion, on a new connection,
    reads its own answer (pooled, the old one failed it: http.client's ResponseNotReady)."""
    from botocore.awsrequest import AWSRequest
    from botocore.exceptions import ReadTimeoutError

    from outcommit_s3.lightsend import Sender

    with _Canned(b"") as server:
        server.RequestHandlerClass = _Stalled  # type: ignore[assignment]
        server.gate.clear()
        sender = Sender(max_pool_connections=4, timeout=(5, 0.2))

        def send(body: bytes) -> bytes:
            request = AWSRequest(method="POST", url=server.url("/bucket/key?uploadId=u"), data=body)
            return sender.send(request.prepare()).content

        with pytest.raises(ReadTimeoutError):
            send(b"<first/>")
        try:  # the first answer's rest still owed: that connection must not carry the next
            assert send(b"<second/>") == b"<second/>"
        finally:
            server.gate.set()
            sender.close()
