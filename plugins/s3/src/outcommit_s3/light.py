"""A lighter request path for CompleteMultipartUpload, job commit's hot request (issue 30).

Why: job commit spends most of its client CPU in botocore's per-request machinery
(serializer, ~40 event handlers, parser: ~0.75 ms per CompleteMultipartUpload), while
building the same request by hand and signing it with botocore's own signer measured
0.16-0.2 ms (benchmarks/client_cpu.py, ``resigned``). On by default
(``outcommit.s3.light-requests``, false turns it off); only this one request takes it, and
only at the URL botocore itself gives the bucket (its endpoint resolution, asked once per
bucket: path or virtual-host style, a custom endpoint's, FIPS,
dual-stack, accelerate, the AWS config file's settings); anything else goes through the
botocore client unchanged.

What it keeps of botocore, through its public classes (and one method of its client,
``_resolve_endpoint_ruleset``: gone or failing, botocore's path takes the call):

* credentials: the client's own chain (explicit keys, profile, environment, instance
  role, an assumed role's refreshing credentials), read with ``get_frozen_credentials()``
  per attempt, so refreshed ones are used;
* signing: SigV4 as botocore's ``S3SigV4Auth`` signs this request (``lightsign``, held
  to botocore's signer by a property test), the request a ``botocore.awsrequest.AWSPreparedRequest``;
* hooks: ``before-send`` handlers on the client's events answer first, as in botocore's
  endpoint; ``needs-retry`` and ``after-call`` fire as there; the events before the
  request (``before-parameter-build``, ``before-call``, ``request-created``) do not: the
  store counts its requests through ``before_call`` here, request meters through
  ``after_attempt``;
* HTTP: ``lightsend.Sender``, kept-alive ``http.client`` connections keeping what
  botocore's ``URLLib3Session`` gives (its pool's size, timeouts, socket options, CA
  bundle and TLS checks, its connection errors as botocore's exceptions, which the store
  translates as before), and ``URLLib3Session`` itself for a proxied URL or a client
  certificate;
* retries: botocore's own decision, per attempt: the client's ``needs-retry`` handlers
  (its retry mode's conditions, backoff and retry quota, max attempts) and its
  ``after-call`` (the quota given back); S3's 200 answer carrying an ``<Error>`` body is
  an error, as botocore's ``_handle_200_error`` makes it (a 500);
* errors: botocore's modeled exception classes (``client.exceptions.from_code``:
  ``NoSuchUpload``..., else ``ClientError``) with the response shape botocore parses
  (``Error.Code/Message``, ``ResponseMetadata.HTTPStatusCode``), so the store's
  translation and the committers' code checks see what they saw;
* the address botocore's endpoint resolution gives the bucket, and its User-Agent.
"""

from __future__ import annotations

import socket
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import quote
from xml.sax.saxutils import escape

from .lightsend import Sender
from .lightsign import Signer

OPERATION = "CompleteMultipartUpload"
_BEFORE_SEND = f"before-send.s3.{OPERATION}"
_NEEDS_RETRY = f"needs-retry.s3.{OPERATION}"
_AFTER_CALL = f"after-call.s3.{OPERATION}"
#: The key botocore's endpoint resolution is asked about (it does not depend on the key).
_PROBE_KEY = "outcommit-light-address"
_KNOWN = frozenset({"Bucket", "Key", "UploadId", "MultipartUpload", "IfNoneMatch"})
_PART = frozenset({"ETag", "PartNumber"})  # a part's checksums (ChecksumCRC32...): botocore's path
#: Answers meaning the bucket is in another region than the client's: botocore's region
#: redirector re-signs and resends them; this path does not, so it hands the call back.
_WRONG_REGION = frozenset({"PermanentRedirect", "AuthorizationHeaderMalformed",
                           "IllegalLocationConstraintException"})  # an opt-in region's bucket
#: Temporary redirects botocore's S3 redirector follows (``S3RegionRedirectorv2``): a 307
#: (a new bucket's DNS not yet everywhere) was an error here, retried at the same URL.
_TEMPORARY_REDIRECTS = frozenset({302, 307})


def _element(name: str, value: Any) -> str:
    return f"<{name}>{int(value) if name == 'PartNumber' else escape(str(value))}</{name}>"


def _body(parts: Sequence[dict[str, Any]]) -> bytes:
    """The request's XML byte for byte as botocore's serializer writes it: each part's
    fields in the order the caller gave them (the store gives PartNumber first)."""
    body = "".join("<Part>" + "".join(_element(k, v) for k, v in p.items()) + "</Part>" for p in parts)
    return (f'<CompleteMultipartUpload xmlns="http://s3.amazonaws.com/doc/2006-03-01/">{body}'
            "</CompleteMultipartUpload>").encode()


def _texts(root: ET.Element) -> dict[str, str]:
    """The text of each of ``root``'s children by name, whatever its namespace, as
    botocore's parser reads them (it drops namespaces): S3's <Error> bodies carry none, its
    results S3's, and a store answering in another one still completed the upload. A name
    given twice: its first. One pass over the children, not one per member read (an
    answer reads up to 15 of them: issue 30's client CPU)."""
    texts: dict[str, str] = {}
    for child in root:
        texts.setdefault(child.tag.rpartition("}")[2], child.text or "")
    return texts


#: Members of the answer beyond ETag and Location: (member, header name or "" for the
#: body's element, boolean?). From the operation's output shape (``answer_fields``).
Fields = tuple[tuple[str, str, bool], ...]


def answer_fields(model: Any) -> Fields:
    """The output shape's members botocore's parser fills, as (member, header, boolean):
    VersionId, the SSE headers, Expiration, RequestCharged; Bucket, Key, the checksums."""
    fields = []
    for name, shape in model.output_shape.members.items():
        where = shape.serialization.get("location")
        if name in ("ETag", "Location") or where not in (None, "header"):
            continue
        header = str(shape.serialization.get("name", name)).lower() if where == "header" else ""
        fields.append((name, header, shape.type_name == "boolean"))
    return tuple(fields)


def parse_answer(status: int, headers: Any, data: bytes, fields: Fields = ()) -> dict[str, Any]:
    """The answer as botocore would parse it: {'ETag': ...} or {'Error': {...}} with
    ResponseMetadata. A 2xx is a completion only when its body is a
    CompleteMultipartUploadResult naming an ETag; any other 2xx (an <Error> inside, a
    truncated body, a gateway's page) is a 500 InternalError, retried, as botocore's
    ``_looks_like_special_case_error`` makes S3's 200-with-an-error."""
    # botocore's shape (its parser's _populate_response_metadata): lower-case header names,
    # RequestId from either request id header, HostId beside S3's own.
    names = {k.lower(): v for k, v in headers.items()}
    metadata: dict[str, Any] = {"HTTPStatusCode": status, "HTTPHeaders": names}
    if "x-amzn-requestid" in names:
        metadata["RequestId"] = names["x-amzn-requestid"]
    elif "x-amz-request-id" in names:
        metadata.update(RequestId=names["x-amz-request-id"], HostId=names.get("x-amz-id-2", ""))
    root = None
    if data.strip():
        try:
            root = ET.fromstring(data)
        except ET.ParseError:
            root = None  # a proxy's HTML page, a body cut short: the status alone tells
    if status < 300:
        return _success(root, metadata, names, fields)
    if root is not None and root.tag.rpartition("}")[2] == "Error":
        texts = _texts(root)
        return {"Error": {"Code": texts.get("Code") or str(status), "Message": texts.get("Message", "")},
                "ResponseMetadata": metadata}
    return {"Error": {"Code": str(status), "Message": ""}, "ResponseMetadata": metadata}


def _success(root: ET.Element | None, metadata: dict[str, Any], headers: dict[str, Any],
             fields: Fields) -> dict[str, Any]:
    """A 2xx's answer. Only a CompleteMultipartUploadResult with a non-empty ETag is one:
    taking anything else for success would count an upload as completed that was not."""
    tag = "" if root is None else root.tag.rpartition("}")[2]
    texts = {} if root is None else _texts(root)
    if tag == "CompleteMultipartUploadResult" and texts.get("ETag"):
        answer: dict[str, Any] = {"ETag": texts["ETag"], "Location": texts.get("Location", "")}
        # The rest as botocore's parser gives it (VersionId, ServerSideEncryption, Bucket...):
        # present when the answer carries it; a caller of the client read them there.
        for name, header, boolean in fields:
            value = headers.get(header) if header else texts.get(name) or None
            if value is not None:
                answer[name] = value.strip().lower() == "true" if boolean else value
        answer["ResponseMetadata"] = metadata
        return answer
    metadata["HTTPStatusCode"] = 500  # botocore: S3's 200 with an error (or a cut body) inside
    if tag == "Error":
        return {"Error": {"Code": texts.get("Code") or "InternalError", "Message": texts.get("Message", "")},
                "ResponseMetadata": metadata}
    what = f"a <{tag}> body" if tag else "an empty or unreadable body"
    return {"Error": {"Code": "InternalError", "Message": f"a 2xx answer with {what}, not a "
                                                          "CompleteMultipartUploadResult with an ETag"},
            "ResponseMetadata": metadata}


def _plain_parts(kwargs: dict[str, Any]) -> bool:
    """Parts of ETag and PartNumber alone: anything else (a part's checksum) was dropped."""
    upload = kwargs.get("MultipartUpload")
    return (isinstance(upload, dict) and set(upload) == {"Parts"}
            and all(isinstance(p, dict) and set(p) <= _PART for p in upload["Parts"]))


_REDIRECTED: dict[str, Any] = {}  # _send's answer when the bucket is in another region
_TEMPORARY: dict[str, Any] = {}  # _send's answer to a temporary redirect: botocore follows it


def _redirect(parsed: dict[str, Any]) -> dict[str, Any] | None:
    """``_REDIRECTED``/``_TEMPORARY`` when botocore's redirector would resend the call."""
    status = parsed["ResponseMetadata"]["HTTPStatusCode"]
    if status == 301 or parsed["Error"].get("Code") in _WRONG_REGION:
        return _REDIRECTED
    return _TEMPORARY if status in _TEMPORARY_REDIRECTS else None


class LightCompleter:
    """CompleteMultipartUpload signed and sent without botocore's client machinery."""

    def __init__(self, client: Any, credentials: Any, verify: Any, max_connections: int,
                 timeouts: tuple[float, float],
                 requester_pays: bool = False, proxies: dict[str, str] | None = None,
                 proxies_config: dict[str, Any] | None = None, tcp_keepalive: bool = False) -> None:

        self._client = client
        self._credentials = credentials
        self._region = client.meta.region_name
        #: bucket -> botocore's URL of its keys less the key ("" when not plain).
        self._bases: dict[str, str] = {}
        self._requester_pays = requester_pays
        # TCP_NODELAY as botocore's client sets it: without it, the body's segment waited for
        # the server's delayed ACK of the headers' (40 ms per completion, measured).
        options = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
        # Keep-alive as botocore's EndpointCreator: the client's config or the AWS config
        # file's tcp_keepalive (``tcp_keepalive``, the caller reads the file).
        if tcp_keepalive or getattr(client.meta.config, "tcp_keepalive", None):
            options.append((socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1))
        # The proxies botocore's endpoint uses (HTTPS_PROXY, the config's): without them this
        # request alone bypassed a proxy that a network reaches S3 only through. The
        # URLLib3Session takes what the leaner sender hands it (a proxied URL, a client
        # certificate: the client's own, which this session lacked).
        cert = getattr(client.meta.config, "client_cert", None)
        self._http = Sender(verify=verify, timeout=timeouts, max_pool_connections=max_connections,
                            socket_options=options, proxies=proxies, proxies_config=proxies_config,
                            client_cert=cert)
        self._model = client.meta.service_model.operation_model(OPERATION)
        self._signer = Signer(self._region)
        self._fields = answer_fields(self._model)
        # botocore's User-Agent (its version, the config's app id and extra): without it
        # urllib3's went out, and S3's access logs and CloudTrail named another client.
        self._user_agent = str(getattr(client.meta.config, "user_agent", "") or "")
        #: Called with (operation, params) once per call this path takes, where botocore
        #: fires ``before-call``: the store's request statistics (iostatistics) would
        #: otherwise miss every light completion.
        self.before_call: list[Callable[[str, dict[str, Any]], None]] = []
        #: Called with (operation, params, HTTP status, 0 without an answer) after every
        #: attempt, where botocore fires ``needs-retry``: request meters
        #: (``outcommit_devtools.costmodel.attach_botocore``) charge attempts there.
        self.after_attempt: list[Callable[[str, dict[str, Any], int], None]] = []
        #: Buckets answered from another region: botocore's path takes them from then on.
        self.redirected: set[str] = set()

    def close(self) -> None:
        """Its connections closed (the store's close closes botocore's client's too)."""
        self._http.close()

    def url(self, bucket: str, key: str) -> str | None:
        """The request's URL as botocore addresses it, or None when that is not plain."""
        if bucket.endswith("--x-s3") or bucket in self.redirected:
            return None  # S3 Express (session auth), another region
        base = self._bases.get(bucket)
        if base is None:
            base = self._bases[bucket] = self._base(bucket)
        return f"{base}{quote(key, safe='/~')}" if base else None

    def _base(self, bucket: str) -> str:
        """botocore's URL for ``bucket``'s keys, less the key; "" when it is not plain.

        Asked of botocore's endpoint resolution (its S3 endpoint rule set, the very call
        its client makes per request), not rebuilt: a custom endpoint with the default
        addressing is path style there, and the AWS config file, FIPS, dual-stack and
        accelerate move the host; a guess sent virtual-host requests botocore never sends
        (a MinIO endpoint without DNS for them). Not plain: any signing but SigV4 for S3
        in the client's region (S3 Express, multi-region access points), extra headers.
        The method is botocore's own, not public: gone or failing, botocore takes the call.
        """
        try:
            endpoint, headers, properties = self._client._resolve_endpoint_ruleset(
                self._model, {"Bucket": bucket, "Key": _PROBE_KEY, "UploadId": "u"}, {})
        except Exception:  # an ARN it cannot serve, a name it refuses: botocore's path raises
            return ""
        scheme = (properties.get("authSchemes") or [{}])[0]
        if headers or (scheme.get("name"), scheme.get("signingName"), scheme.get("signingRegion")) != (
                "sigv4", "s3", self._region):
            return ""
        return f"{str(endpoint).rstrip('/')}/"

    def complete(self, kwargs: dict[str, Any]) -> dict[str, Any] | None:
        """The parsed answer to ``complete_multipart_upload(**kwargs)``, or None when this
        request must take botocore's path (a parameter this path does not send, an
        address it does not make, no credentials: botocore raises NoCredentialsError, a
        bucket in another region: botocore's redirector resends it there)."""
        from botocore.handlers import add_recursion_detection_header

        if set(kwargs) - _KNOWN or self._credentials is None or not _plain_parts(kwargs):
            return None
        url = self.url(kwargs["Bucket"], kwargs["Key"])
        if url is None:
            return None
        upload_id = kwargs["UploadId"]
        body = _body(kwargs["MultipartUpload"]["Parts"])
        headers = {"Content-Type": "application/xml"}
        if self._user_agent:
            headers["User-Agent"] = self._user_agent
        if kwargs.get("IfNoneMatch"):
            headers["If-None-Match"] = str(kwargs["IfNoneMatch"])
        if self._requester_pays:
            headers["x-amz-request-payer"] = "requester"
        # botocore's before-call handler, as is: in AWS Lambda, the X-Ray trace id (AWS's
        # recursion detection); without it a Lambda's completions were missing from its trace.
        add_recursion_detection_header({"headers": headers})
        answer: dict[str, Any] | None = None
        try:
            answer = self._send(f"{url}?uploadId={quote(upload_id, safe='')}", headers, body, kwargs)
        finally:
            if answer is not _REDIRECTED and answer is not _TEMPORARY:  # botocore's before-call counts it
                for hook in self.before_call:
                    hook(OPERATION, kwargs)
        if answer is _REDIRECTED:
            self.redirected.add(kwargs["Bucket"])
        return None if answer is _REDIRECTED or answer is _TEMPORARY else answer

    def _send(self, url: str, headers: dict[str, str], body: bytes,
              kwargs: dict[str, Any]) -> dict[str, Any]:
        """The parsed answer after botocore's own retry decisions, or a handback sentinel."""
        # botocore's per-call context: its retry quota records what it lent here; its
        # redirector is told to stand aside (the answers it redirects are handed back below).
        request_dict = {"context": {"s3_redirect": {"redirected": True, "bucket": kwargs["Bucket"]}}}
        attempt = 0
        while True:
            attempt += 1
            parsed, response, caught = None, None, None
            try:
                response = self._sent(self._signed(url, headers, body))
                # The sender's lower-cased headers when it answered, a hook's answer's else.
                parsed = parse_answer(response.status_code, getattr(response, "lower_headers", None)
                                      or response.headers, response.content, self._fields)
                # A 2xx that is no completion reads as a 500: the retry handlers read the
                # response's status, and botocore's own 200-error handlers set it so too
                # (botocore 1.35's only for an <Error> body, so a gateway's page was final).
                response.status_code = parsed["ResponseMetadata"]["HTTPStatusCode"]
            except Exception as exc:  # botocore's connection errors: retried as botocore does
                caught = exc
            for hook in self.after_attempt:
                hook(OPERATION, kwargs, 0 if response is None else response.status_code)
            if parsed is not None:
                parsed["ResponseMetadata"]["RetryAttempts"] = attempt - 1  # as botocore's endpoint
            handed = None if parsed is None or "Error" not in parsed else _redirect(parsed)
            if handed is not None:
                return handed
            # Asked after every attempt, a success too, as botocore's endpoint asks (its
            # handlers then note MaxAttemptsReached in the answer's metadata).
            delay = self._retry_delay(attempt, response, parsed, caught, request_dict)
            if delay is not None:
                time.sleep(delay)
                continue
            if caught is not None:
                raise caught
            assert parsed is not None  # nothing caught: the answer was parsed
            if "Error" not in parsed:
                self._client.meta.events.emit(_AFTER_CALL, http_response=response, parsed=parsed,
                                              model=self._model, context=request_dict["context"])
                return parsed
            # botocore's modeled class (client.exceptions.NoSuchUpload...), as its client
            # raises: ``except client.exceptions.X`` missed a plain ClientError.
            raise self._client.exceptions.from_code(parsed["Error"]["Code"])(parsed, OPERATION)

    def _retry_delay(self, attempt: int, response: Any, parsed: dict[str, Any] | None,
                     caught: Exception | None, request_dict: dict[str, Any]) -> float | None:
        """Seconds to wait before the next attempt, or None: botocore's own decision, its
        client's ``needs-retry`` handlers asked as its endpoint asks them (the configured
        mode's conditions, backoff and retry quota, shared with the client's other calls;
        S3's 200 with an error inside made a 500). Classes of our own drifted from them:
        no retry quota, no throttling-aware backoff under botocore's newer retries."""
        from botocore.hooks import first_non_none_response

        answers = self._client.meta.events.emit(
            _NEEDS_RETRY, response=None if response is None else (response, parsed), endpoint=None,
            operation=self._model, attempts=attempt, caught_exception=caught, request_dict=request_dict)
        delay = first_non_none_response(answers)
        return None if delay is None or delay is False else float(delay)

    def _sent(self, request: Any) -> Any:
        """The answer to ``request``: a ``before-send`` hook's, as botocore's endpoint asks
        them first (stubs, fault injection: skipping it would bypass them), else the
        server's."""
        from botocore.hooks import first_non_none_response

        answer = first_non_none_response(self._client.meta.events.emit(_BEFORE_SEND, request=request))
        return answer if answer is not None else self._http.send(request)

    def _signed(self, url: str, headers: dict[str, str], body: bytes) -> Any:
        """The request signed as botocore's ``S3SigV4Auth`` signs it (``lightsign``), its
        Content-Length set as ``AWSRequest.prepare()`` sets it: what hooks and the sender get."""
        from botocore.awsrequest import AWSPreparedRequest, HeadersDict

        # Frozen per attempt: refreshing credentials (an assumed role) renew themselves here.
        signed = self._signer.headers("POST", url, headers, body, self._credentials.get_frozen_credentials())
        prepared = HeadersDict(signed.items())
        prepared["Content-Length"] = str(len(body))
        request = AWSPreparedRequest("POST", url, prepared, body, False)
        # Its context as AWSRequest.prepare() gives one (newer botocore; 1.35 has none):
        # a hook reading it met None where botocore's path gives a mapping.
        if getattr(request, "context", False) is None:
            request.context = {}
        return request
