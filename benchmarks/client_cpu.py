"""Client CPU per S3 request on the hot paths, and what the candidates would save (issue 30).

    python benchmarks/client_cpu.py [--requests 300] [--profile 12] [--commit-files 200]
                                    [--paths store,boto3,trimmed,resigned,resigned-urllib3,...]

A canned S3 server in *another process* answers at once (fixed XML: no state, no work),
so the CPU measured here is the client's alone: ``time.process_time`` of this process
(every thread) plus ``resource.getrusage(RUSAGE_CHILDREN)`` (children it waited for),
over ``--requests`` requests in one thread, per request. Operations, as job commit and
the tasks send them: ``UploadPart`` (a 16 KiB part), ``CompleteMultipartUpload`` (2
parts), ``ListObjectsV2`` (a page of 1,000 keys, parsed), ``DeleteObjects`` (1,000 keys),
``PutObject`` (1 KiB).

Paths (each sends the same request, SigV4 with a SHA-256 payload hash as botocore does
over http, and reads what the caller needs from the answer):

* ``store``: the project's own path: ``S3Store`` (``outcommit.open_store``) and its
  multipart API, over its ``TranslatingClient`` (boto3 with the store's config);
* ``boto3``: a plain boto3 client, the same botocore config;
* ``trimmed``: that client with botocore's public switches: ``parameter_validation=False``,
  checksums ``when_required`` (no CRC32 of every body), and the handlers the profile
  shows without effect here unregistered through ``client.meta.events``;
* ``resigned``: each request built once as a template (method, URL, headers, body),
  then per request: filled, signed by botocore's ``S3SigV4Auth`` with credentials from
  botocore's own resolver, sent on a kept-alive ``http.client`` connection, and the
  answer read by ElementTree (no botocore serializer, handlers or parser);
* ``resigned-urllib3``: as ``resigned``, sent through urllib3's public
  ``HTTPConnectionPool.urlopen`` (TCP_NODELAY, connect/read timeouts, no retries): what
  a light path's own pool would cost;
* ``resigned-session``: as ``resigned``, sent through botocore's ``URLLib3Session``
  (the light path's sender today: proxies, CA bundle, botocore's exceptions);
* ``crt-sign``: the same, signed by ``awscrt.auth.aws_sign_request`` (AWS's C runtime);
* ``crt-http``: signed and sent by the C runtime (``awscrt.http`` connection);
  (both need ``pip install awscrt``, which is not a project requirement: once it is
  installed, botocore itself signs in C, ``BOTO_DISABLE_CRT=true`` turns that off; the
  header says which the ``store``/``boto3``/``trimmed`` rows ran);
* ``floor``: the request unsigned on ``http.client``: what HTTP in Python costs at least.

Then a cProfile of the ``store`` path (top entries by own time, and by package), and
the job commit of a real ``magic`` job of ``--commit-files`` files against a moto server
in another process: CPU of this process and its children per file.
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import http.client
import io
import pstats
import re
import resource
import statistics
import sys
import time
import xml.etree.ElementTree as ET
from base64 import b64encode
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

BUCKET = "bench"
REGION = "us-east-1"
PART = b"p" * 16 * 1024
SMALL = b"s" * 1024
PAGE = 1000
OPERATIONS = ("UploadPart", "CompleteMultipartUpload", "ListObjectsV2", "DeleteObjects", "PutObject")
PATHS = ("store", "store-light", "boto3", "trimmed", "resigned", "resigned-urllib3", "resigned-session",
         "crt-sign", "crt-http", "floor")
NS = "http://s3.amazonaws.com/doc/2006-03-01/"


# -- the canned server (a child process) -----------------------------------------------------------
def _listing() -> bytes:
    contents = "".join(f"<Contents><Key>dir/part-{i:05d}.parquet</Key><LastModified>2026-11-27T10:00:00.000Z"
                       f"</LastModified><ETag>&quot;{i:032x}&quot;</ETag><Size>{1000 + i}</Size>"
                       "<StorageClass>STANDARD</StorageClass></Contents>" for i in range(PAGE))
    return (f'<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="{NS}"><Name>{BUCKET}</Name>'
            f"<Prefix>dir/</Prefix><KeyCount>{PAGE}</KeyCount><MaxKeys>1000</MaxKeys>"
            f"<IsTruncated>false</IsTruncated>{contents}</ListBucketResult>").encode()


class Canned(BaseHTTPRequestHandler):
    """S3's answers to the benchmark's five operations, without state."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    LISTING = _listing()

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self.send_response_only(status)
        for name, value in {"x-amz-request-id": "canned", "Content-Length": str(len(body)),
                            **(headers or {})}.items():
            self.send_header(name, value)
        self.end_headers()
        if body and self.command != "HEAD":
            self.wfile.write(body)

    def _xml(self, body: str) -> None:
        self._send(200, f'<?xml version="1.0" encoding="UTF-8"?>{body}'.encode(),
                   {"Content-Type": "application/xml"})

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        path, _, query = self.path.partition("?")
        keys = {p.split("=", 1)[0] for p in query.split("&") if p}
        key = path.split("/", 2)[2] if path.count("/") >= 2 else ""
        if self.command == "PUT":
            self._send(200, headers={"ETag": f'"{hashlib.md5(path.encode()).hexdigest()}"'})
        elif self.command == "POST" and "uploads" in keys:
            self._xml(f'<InitiateMultipartUploadResult xmlns="{NS}"><Bucket>{BUCKET}</Bucket><Key>{key}'
                      "</Key><UploadId>canned-upload</UploadId></InitiateMultipartUploadResult>")
        elif self.command == "POST" and "uploadId" in keys:
            self._xml(f'<CompleteMultipartUploadResult xmlns="{NS}"><Location>http://x/{key}</Location>'
                      f'<Bucket>{BUCKET}</Bucket><Key>{key}</Key><ETag>"{"0" * 32}-2"</ETag>'
                      "</CompleteMultipartUploadResult>")
        elif self.command == "POST" and "delete" in keys:
            self._xml(f'<DeleteResult xmlns="{NS}"></DeleteResult>')
        elif self.command == "GET" and "list-type" in keys:
            self._send(200, self.LISTING, {"Content-Type": "application/xml"})
        else:
            self._send(200)

    do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _answer


def serve_canned(port: int) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", port), Canned)
    server.daemon_threads = True
    print("ready", flush=True)
    server.serve_forever()


# -- measuring ----------------------------------------------------------------------------------------
def cpu_now() -> float:
    """CPU seconds of this process (all threads) and of the children it waited for."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def per_request(call: Callable[[int], Any], requests: int) -> float:
    for i in range(min(20, requests)):  # warm: connections, caches, lazy imports
        call(i)
    started = cpu_now()
    for i in range(requests):
        call(i)
    return (cpu_now() - started) / requests * 1000  # ms


def delete_body(keys: list[str]) -> bytes:
    objects = "".join(f"<Object><Key>{k}</Key></Object>" for k in keys)
    return f'<Delete xmlns="{NS}"><Object><Key>x</Key></Object>{objects}<Quiet>true</Quiet></Delete>'.encode()


def complete_body() -> bytes:
    parts = "".join(f"<Part><PartNumber>{n}</PartNumber><ETag>\"{n:032x}\"</ETag></Part>" for n in (1, 2))
    return f'<CompleteMultipartUpload xmlns="{NS}">{parts}</CompleteMultipartUpload>'.encode()


KEYS = [f"dir/part-{i:05d}.parquet" for i in range(PAGE)]


def template(operation: str, i: int) -> tuple[str, str, bytes, dict[str, str]]:
    """(method, path?query, body, extra headers) of request ``i`` of ``operation``."""
    key = f"dir/part-{i:05d}.parquet"
    if operation == "UploadPart":
        return "PUT", f"/{BUCKET}/{key}?partNumber=1&uploadId=canned-upload", PART, {}
    if operation == "CompleteMultipartUpload":
        return "POST", f"/{BUCKET}/{key}?uploadId=canned-upload", complete_body(), {}
    if operation == "ListObjectsV2":
        return "GET", f"/{BUCKET}?list-type=2&prefix=dir%2F&encoding-type=url", b"", {}
    if operation == "DeleteObjects":
        body = delete_body(KEYS[:-1])
        md5 = b64encode(hashlib.md5(body).digest()).decode()  # S3 requires it (or a checksum)
        return "POST", f"/{BUCKET}?delete", body, {"Content-MD5": md5}
    return "PUT", f"/{BUCKET}/{key}", SMALL, {}


def read_answer(operation: str, status: int, body: bytes, headers: Any) -> Any:
    """What a caller needs from the answer: the ETag, the listing's entries, the errors."""
    if status >= 300:
        raise RuntimeError(f"{operation}: HTTP {status}")
    if operation in ("UploadPart", "PutObject"):
        return headers.get("ETag") or headers.get("etag")
    root = ET.fromstring(body) if body else None
    if operation == "ListObjectsV2":
        assert root is not None
        return [(c.findtext(f"{{{NS}}}Key"), int(c.findtext(f"{{{NS}}}Size") or 0),
                 c.findtext(f"{{{NS}}}ETag")) for c in root.iter(f"{{{NS}}}Contents")]
    if operation == "DeleteObjects":
        return [] if root is None else list(root.iter(f"{{{NS}}}Error"))
    assert root is not None
    return root.findtext(f"{{{NS}}}ETag")


# -- the paths --------------------------------------------------------------------------------------
def store_calls(endpoint: str, light: bool = False) -> dict[str, Callable[[int], Any]]:
    import outcommit
    from outcommit_s3.embedded import EmbeddedS3

    config = {**EmbeddedS3(endpoint_url=endpoint, server=None).config,
              "outcommit.s3.light-requests": str(light).lower()}
    store: Any = outcommit.open_store(f"s3://{BUCKET}/dir", config)
    multipart = store.multipart()
    paths = [f"{BUCKET}/{k}" for k in KEYS]
    return {"UploadPart": lambda i: multipart.upload_part(paths[i % PAGE], "canned-upload", 1, PART),
            "CompleteMultipartUpload": lambda i: multipart.complete(paths[i % PAGE], "canned-upload",
                                                                    [f"{1:032x}", f"{2:032x}"]),
            "ListObjectsV2": lambda i: store.list_files(f"{BUCKET}/dir"),
            "DeleteObjects": lambda i: store.delete_many(paths),
            "PutObject": lambda i: store.write_bytes(paths[i % PAGE], SMALL)}


TRIMMED = ("parameter_validation=False; checksums when_required; a fixed user_agent (botocore "
           "builds its full User-Agent twice per request otherwise, ~36 components sanitised); "
           "timestamps left as text (the parser factory's timestamp_parser: dateutil parses "
           "every LastModified of a listing); handlers without effect here unregistered")


def boto3_client(endpoint: str, trimmed: bool) -> Any:
    import boto3
    import botocore
    import botocore.session
    from botocore.config import Config

    from outcommit_s3.embedded import DUMMY_KEY, DUMMY_SECRET

    options: dict[str, Any] = {"retries": {"total_max_attempts": 2, "mode": "standard"},
                               "s3": {"addressing_style": "path"}}
    core = botocore.session.get_session()
    if trimmed:
        options.update(parameter_validation=False,
                       user_agent=f"Boto3/{boto3.__version__} botocore/{botocore.__version__} outcommit")
        if "request_checksum_calculation" in Config.OPTION_DEFAULTS:  # botocore >= 1.36 checksums
            options.update(request_checksum_calculation="when_required",
                           response_checksum_validation="when_required")
        # botocore's documented switch for raw timestamps (a job commit needs none parsed).
        core.get_component("response_parser_factory").set_parser_defaults(timestamp_parser=str)
    session = boto3.session.Session(botocore_session=core)
    client = session.client("s3", endpoint_url=endpoint, region_name=REGION, aws_access_key_id=DUMMY_KEY,
                            aws_secret_access_key=DUMMY_SECRET, config=Config(**options))
    if trimmed:
        trim_handlers(client)
    return client


#: Handlers of botocore's S3 client that do nothing for these requests on a path-style
#: endpoint given explicitly (event, handler name): each costs a call or more per request.
UNUSED_HANDLERS = (
    ("before-parameter-build.s3", "validate_bucket_name"),
    ("before-parameter-build.s3", "remove_bucket_from_url_paths_from_model"),
    ("before-parameter-build.s3", "sse_md5"),
    ("before-parameter-build.s3", "copy_source_sse_md5"),
    ("before-parameter-build.s3", "validate_ascii_metadata"),
    ("before-parameter-build.s3", "set_list_objects_encoding_type_url"),
    ("before-call.s3", "add_expect_header"),
    ("before-call.s3", "add_recursion_detection_header"),
    ("request-created", "add_retry_headers"),
)


def trim_handlers(client: Any) -> list[str]:
    """Unregister :data:`UNUSED_HANDLERS` through the public ``events.unregister``, finding
    each handler in ``botocore.handlers.BUILTIN_HANDLERS``; the names removed."""
    from botocore.handlers import BUILTIN_HANDLERS

    wanted = set(UNUSED_HANDLERS)
    removed = []
    for entry in BUILTIN_HANDLERS:
        event, handler = entry[0], entry[1]
        if (event, getattr(handler, "__name__", "")) in wanted:
            client.meta.events.unregister(event, handler)
            removed.append(handler.__name__)
    return removed


def boto3_calls(client: Any) -> dict[str, Callable[[int], Any]]:
    parts = {"Parts": [{"PartNumber": n, "ETag": f'"{n:032x}"'} for n in (1, 2)]}
    delete = {"Objects": [{"Key": k} for k in KEYS], "Quiet": True}
    return {"UploadPart": lambda i: client.upload_part(Bucket=BUCKET, Key=KEYS[i % PAGE], PartNumber=1,
                                                       UploadId="canned-upload", Body=PART)["ETag"],
            "CompleteMultipartUpload": lambda i: client.complete_multipart_upload(
                Bucket=BUCKET, Key=KEYS[i % PAGE], UploadId="canned-upload", MultipartUpload=parts)["ETag"],
            "ListObjectsV2": lambda i: client.list_objects_v2(Bucket=BUCKET, Prefix="dir/")["Contents"],
            "DeleteObjects": lambda i: client.delete_objects(Bucket=BUCKET, Delete=delete).get("Errors"),
            "PutObject": lambda i: client.put_object(Bucket=BUCKET, Key=KEYS[i % PAGE], Body=SMALL)["ETag"]}


def frozen_credentials() -> Any:
    """Credentials as botocore's resolver finds them (here: the benchmark's keys in the
    environment chain's place), frozen per request: a refreshable set refreshes itself."""
    import botocore.session

    from outcommit_s3.embedded import DUMMY_KEY, DUMMY_SECRET

    session = botocore.session.get_session()
    session.set_credentials(DUMMY_KEY, DUMMY_SECRET)
    return session.get_credentials()


class Connection:
    """One kept-alive http.client connection (a pool of one: the benchmark is serial)."""

    def __init__(self, endpoint: str) -> None:
        host, port = endpoint.removeprefix("http://").split(":")
        self.host = f"{host}:{port}"
        self.conn = http.client.HTTPConnection(host, int(port), timeout=30)

    def send(self, method: str, target: str, headers: dict[str, str], body: bytes) -> tuple[int, bytes, Any]:
        self.conn.request(method, target, body=body or None, headers=headers)
        response = self.conn.getresponse()
        return response.status, response.read(), response.headers


class Urllib3Connection:
    """urllib3's own pool, public API only: the sender a leaner light path would use."""

    def __init__(self, endpoint: str) -> None:
        import socket

        import urllib3

        host, port = endpoint.removeprefix("http://").split(":")
        self.pool = urllib3.HTTPConnectionPool(host, int(port), maxsize=1, retries=False,
                                               timeout=urllib3.Timeout(connect=30, read=30),
                                               socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)])

    def send(self, method: str, target: str, headers: dict[str, str], body: bytes) -> tuple[int, bytes, Any]:
        response = self.pool.urlopen(method, target, body=body or None, headers=headers, redirect=False,
                                     assert_same_host=False, preload_content=True, decode_content=False)
        return response.status, response.data, response.headers


class SessionConnection:
    """botocore's ``URLLib3Session``: the light path's sender (outcommit_s3/light.py)."""

    def __init__(self, endpoint: str) -> None:
        import socket

        from botocore.httpsession import URLLib3Session

        self.endpoint = endpoint
        self.session = URLLib3Session(timeout=(30, 30), max_pool_connections=1,
                                      socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)])

    def send(self, method: str, target: str, headers: dict[str, str], body: bytes) -> tuple[int, bytes, Any]:
        from botocore.awsrequest import AWSRequest

        request = AWSRequest(method=method, url=self.endpoint + target, data=body, headers=headers).prepare()
        response = self.session.send(request)
        return response.status_code, response.content, response.headers


def resigned_calls(endpoint: str,
                   sender: Callable[[str], Any] = Connection) -> dict[str, Callable[[int], Any]]:
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest

    credentials = frozen_credentials()
    conn = sender(endpoint)

    def call(operation: str) -> Callable[[int], Any]:
        def once(i: int) -> Any:
            method, target, body, extra = template(operation, i)
            request = AWSRequest(method=method, url=endpoint + target, data=body,
                                 headers={**extra, "Content-Length": str(len(body))} if body else extra)
            S3SigV4Auth(credentials.get_frozen_credentials(), "s3", REGION).add_auth(request)
            status, data, headers = conn.send(method, target, dict(request.headers.items()), body)
            return read_answer(operation, status, data, headers)
        return once

    return {op: call(op) for op in OPERATIONS}


def crt_credentials(frozen: Any) -> Any:
    from awscrt import auth

    return auth.AwsCredentialsProvider.new_static(frozen.access_key, frozen.secret_key, frozen.token)


def crt_signing(provider: Any, body: bytes) -> Any:
    """SigV4 for S3 as botocore signs over http: headers, the payload's SHA-256."""
    from awscrt import auth

    return auth.AwsSigningConfig(
        algorithm=auth.AwsSigningAlgorithm.V4, signature_type=auth.AwsSignatureType.HTTP_REQUEST_HEADERS,
        credentials_provider=provider, region=REGION, service="s3",
        signed_body_value=hashlib.sha256(body).hexdigest(),
        signed_body_header_type=auth.AwsSignedBodyHeaderType.X_AMZ_CONTENT_SHA_256,
        use_double_uri_encode=False, should_normalize_uri_path=False)


def crt_sign_calls(endpoint: str) -> dict[str, Callable[[int], Any]]:
    from awscrt import auth
    from awscrt import http as crt_http

    credentials = frozen_credentials()
    conn = Connection(endpoint)

    def call(operation: str) -> Callable[[int], Any]:
        def once(i: int) -> Any:
            method, target, body, extra = template(operation, i)
            provider = crt_credentials(credentials.get_frozen_credentials())
            headers = crt_http.HttpHeaders([("Host", conn.host), *extra.items(),
                                            *([("Content-Length", str(len(body)))] if body else [])])
            request = crt_http.HttpRequest(method, target, headers)
            auth.aws_sign_request(request, crt_signing(provider, body)).result()
            status, data, answer = conn.send(method, target, dict(request.headers), body)
            return read_answer(operation, status, data, answer)
        return once

    return {op: call(op) for op in OPERATIONS}


def crt_http_calls(endpoint: str) -> dict[str, Callable[[int], Any]]:
    from awscrt import auth
    from awscrt import http as crt_http
    from awscrt import io as crt_io

    host, port = endpoint.removeprefix("http://").split(":")
    loop = crt_io.EventLoopGroup(1)
    bootstrap = crt_io.ClientBootstrap(loop, crt_io.DefaultHostResolver(loop))
    connection = crt_http.HttpClientConnection.new(host_name=host, port=int(port),
                                                   bootstrap=bootstrap).result()
    provider = crt_credentials(frozen_credentials().get_frozen_credentials())

    def call(operation: str) -> Callable[[int], Any]:
        def once(i: int) -> Any:
            method, target, body, extra = template(operation, i)
            headers = crt_http.HttpHeaders([("Host", f"{host}:{port}"), *extra.items(),
                                            *([("Content-Length", str(len(body)))] if body else [])])
            request = crt_http.HttpRequest(method, target, headers, io.BytesIO(body) if body else None)
            auth.aws_sign_request(request, crt_signing(provider, body)).result()
            chunks: list[bytes] = []
            response: dict[str, Any] = {}

            def on_response(status_code: int, headers: list[tuple[str, str]], **_: Any) -> None:
                response["status"], response["headers"] = status_code, dict(headers)

            stream = connection.request(request, on_response=on_response,
                                        on_body=lambda chunk, **_: chunks.append(bytes(chunk)))
            stream.activate()
            stream.completion_future.result(30)
            return read_answer(operation, response["status"], b"".join(chunks), response["headers"])
        return once

    return {op: call(op) for op in OPERATIONS}


def floor_calls(endpoint: str) -> dict[str, Callable[[int], Any]]:
    conn = Connection(endpoint)

    def call(operation: str) -> Callable[[int], Any]:
        def once(i: int) -> Any:
            method, target, body, extra = template(operation, i)
            status, data, headers = conn.send(method, target, extra, body)
            return read_answer(operation, status, data, headers)
        return once

    return {op: call(op) for op in OPERATIONS}


def calls_for(path: str, endpoint: str) -> dict[str, Callable[[int], Any]]:
    if path in ("store", "store-light"):
        return store_calls(endpoint, light=path == "store-light")
    if path in ("boto3", "trimmed"):
        return boto3_calls(boto3_client(endpoint, trimmed=path == "trimmed"))
    if path in ("resigned-urllib3", "resigned-session"):
        sender = Urllib3Connection if path == "resigned-urllib3" else SessionConnection
        return resigned_calls(endpoint, sender)
    return {"resigned": resigned_calls, "crt-sign": crt_sign_calls, "crt-http": crt_http_calls,
            "floor": floor_calls}[path](endpoint)


KEEPS = {
    "store": "everything: credential chain and refresh, retries (botocore's standard mode and the "
             "store's own for completions), error translation",
    "store-light": "as store, with outcommit.s3.light-requests=true: CompleteMultipartUpload on the "
                   "store's light path (outcommit_s3/light.py); the other requests as store",
    "boto3": "credential chain and refresh, botocore's retries; not the store's error translation",
    "trimmed": "the same as boto3 (checksums still sent where S3 requires them: DeleteObjects); "
               "LastModified as text",
    "resigned": "credentials from botocore's resolver (refreshed by get_frozen_credentials); retries and "
                "error parsing to be written (or botocore's RetryHandler reused per request)",
    "resigned-urllib3": "as resigned, sent by urllib3's HTTPConnectionPool (public API): proxies, CA "
                        "bundle and botocore's exceptions to be kept by hand",
    "resigned-session": "as resigned, sent by botocore's URLLib3Session, as the light path sends",
    "crt-sign": "as resigned; signing in C (awscrt, a new dependency)",
    "crt-http": "as crt-sign, and the CRT's own connection pool; retries: awscrt.io's retry strategy "
                "or ours; every answer parsed by us",
    "floor": "nothing: no signature (not usable against S3), the least HTTP in Python costs",
}


def measure_paths(endpoint: str, paths: list[str], requests: int,
                  repeat: int) -> dict[str, dict[str, float | str]]:
    """Each path's CPU per request and operation: the median of ``repeat`` rounds, the
    paths interleaved within each round (a machine's load drifts: each path sees it)."""
    calls: dict[str, dict[str, Callable[[int], Any]]] = {}
    table: dict[str, dict[str, float | str]] = {}
    for path in paths:
        try:
            calls[path] = calls_for(path, endpoint)
        except ImportError as exc:
            table[path] = {op: f"n/a (no {exc.name})" for op in OPERATIONS}
    seen: dict[tuple[str, str], list[float]] = {}
    for _ in range(repeat):
        for path, by_operation in calls.items():
            for op, call in by_operation.items():
                count = requests if op not in ("ListObjectsV2", "DeleteObjects") else max(1, requests // 5)
                seen.setdefault((path, op), []).append(per_request(call, count))
    for path in paths:
        if path in calls:
            table[path] = {op: statistics.median(seen[(path, op)]) for op in OPERATIONS}
    return {path: table[path] for path in paths}  # in the order asked


def print_table(table: dict[str, dict[str, float | str]]) -> None:
    print("\nms of client CPU per request (process + children), one thread:")
    print(f"  {'path':16s}" + "".join(f"{op:>25s}" for op in OPERATIONS))
    for path, row in table.items():
        cells = "".join(f"{row[op]:>25.3f}" if isinstance(row[op], float) else f"{str(row[op])[:24]:>25s}"
                        for op in OPERATIONS)
        print(f"  {path:16s}" + cells)


def profile_store(endpoint: str, requests: int, top: int) -> None:
    calls = store_calls(endpoint)
    for operation in ("CompleteMultipartUpload", "UploadPart", "ListObjectsV2"):
        call = calls[operation]
        count = requests if operation != "ListObjectsV2" else max(1, requests // 5)
        for i in range(10):
            call(i)
        # The wall clock (a process-time timer costs a system call per event and inflates
        # small functions ten times over); the calls that wait for the server are left out.
        profiler = cProfile.Profile()
        profiler.enable()
        for i in range(count):
            call(i)
        profiler.disable()
        stats = pstats.Stats(profiler)
        by_package: Counter[str] = Counter()
        rows = []
        waited = 0.0
        for (filename, line, name), (_cc, calls_n, own, _cum, _callers) in stats.stats.items():  # type: ignore[attr-defined]
            if filename == "~" and any(w in name for w in WAITING):
                waited += own
                continue
            by_package[_package(filename)] += own
            rows.append((own, calls_n, f"{_short(filename)}:{line}({name})"))
        rows.sort(reverse=True)
        total = sum(by_package.values())
        print(f"\nprofile of the store path, {operation} ({count} requests: {total / count * 1000:.3f} ms "
              f"each in Python and C calls, {waited / count * 1000:.3f} ms waiting on the socket, left "
              "out; cProfile's own overhead inflates both):")
        share = ", ".join(f"{pkg} {own / total:.0%}" for pkg, own in by_package.most_common(8))
        print(f"  own time by package: {share}")
        for own, calls_n, where in rows[:top]:
            print(f"  {own / count * 1e6:8.1f} us/request  {calls_n / count:6.1f} calls/request  {where}")


#: Built-in calls that wait for the server (wall time under cProfile's clock, not CPU).
WAITING = ("recv_into", "sendall", "poll", "select", "acquire", "wait")


def _package(filename: str) -> str:
    for marker in ("botocore", "boto3", "urllib3", "dateutil", "outcommit_s3", "outcommit", "http/client",
                   "xml",
                   "email", "hashlib", "logging", "threading", "socket", "ssl", "json"):
        if marker in filename:
            return marker.replace("/", ".")
    return "builtins" if filename.startswith("~") or filename == "~" else "other"


def _short(filename: str) -> str:
    match = re.search(r"(botocore|boto3|urllib3|dateutil|outcommit_s3|outcommit|http|xml|email)/.*", filename)
    return match.group(0) if match else filename.rsplit("/", 1)[-1]


# -- job commit ------------------------------------------------------------------------------------------
def job_commit_cpu(files: int, light: bool = False) -> tuple[float, int]:
    """CPU of a ``magic`` job commit of ``files`` files (moto in another process), per file."""
    import outcommit
    from outcommit.testing.faults import stop_process
    from s3_commit_scale import start_moto_process

    server, process = start_moto_process()
    try:
        url = f"s3://{BUCKET}/commit-cpu-{time.monotonic_ns()}"
        config = {**server.config, "outcommit.committer.threads": "64",
                  "outcommit.s3.light-requests": str(light).lower()}
        committer = outcommit.create_committer(url, config, "magic")
        job = outcommit.JobContext(url, config=committer.config)
        committer.setup_job(job)
        messages = []
        tasks = 8
        for index in range(tasks):
            task = job.task_attempt(index)
            committer.setup_task(task)
            fs, base = committer.filesystem(task), committer.work_path(task)
            for n in range(index, files, tasks):
                fs.pipe_file(f"{base}/day={n % 25:02d}/part-{n:05d}.parquet", b"x" * 1000)
            messages.append(committer.commit_task(task))
        started = cpu_now()
        committer.commit_job(job, messages)
        spent = cpu_now() - started
        return spent / files, committer.threads
    finally:
        stop_process(process)


def start_canned() -> tuple[str, Any]:
    import subprocess

    from outcommit_s3.embedded import free_port

    port = free_port()
    process = subprocess.Popen([sys.executable, __file__, "--serve", str(port)], stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True)
    assert process.stdout is not None
    if process.stdout.readline().strip() != "ready":
        process.kill()
        raise RuntimeError("the canned S3 server did not start")
    return f"http://127.0.0.1:{port}", process


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300, help="requests per operation and path")
    parser.add_argument("--repeat", type=int, default=3, help="interleaved rounds (median)")
    parser.add_argument("--paths", default=",".join(PATHS), help=f"of {', '.join(PATHS)}")
    parser.add_argument("--profile", type=int, default=12, help="top entries of the profile (0: none)")
    parser.add_argument("--commit-files", type=int, default=200, help="files of the job commit (0: none)")
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve_canned(args.serve)
        return 0
    paths = [p for p in args.paths.split(",") if p]
    unknown = [p for p in paths if p not in PATHS]
    if unknown:
        parser.error(f"unknown path {unknown[0]!r}: use {', '.join(PATHS)}")
    import botocore
    from botocore.compat import HAS_CRT

    endpoint, process = start_canned()
    try:
        print(f"client CPU per request: botocore {botocore.__version__} (signing "
              f"{'in C: awscrt is installed' if HAS_CRT else 'in Python: no awscrt, or BOTO_DISABLE_CRT'}), "
              f"Python {sys.version.split()[0]}, a canned S3 server in another process at {endpoint} "
              f"(answers at once, no state); {args.requests} requests per operation (listing and delete: "
              f"{max(1, args.requests // 5)}), median of {args.repeat} interleaved rounds")
        table = measure_paths(endpoint, paths, args.requests, args.repeat)
        print_table(table)
        if "trimmed" in paths:
            print(f"\ntrimmed: {TRIMMED}")
        print("\nwhat each path keeps of botocore's behaviour:")
        for path in paths:
            print(f"  {path:16s} {KEEPS[path]}")
        if args.profile:
            profile_store(endpoint, args.requests, args.profile)
    finally:
        process.kill()
        process.wait()
    for light in (False, True) if args.commit_files else ():
        per_file, threads = job_commit_cpu(args.commit_files, light)
        print(f"\njob commit of a magic job of {args.commit_files} files (moto in another process, "
              f"{threads} threads, outcommit.s3.light-requests={str(light).lower()}): "
              f"{per_file * 1000:.2f} ms of client CPU per file (driver + children; target <= 0.5)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

