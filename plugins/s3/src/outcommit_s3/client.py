"""The store's S3 client: credentials, per-request settings, and errors a user can act on.

A botocore client, not boto3's: s3fs already brings botocore through aiobotocore, which
pins it to a few releases, and boto3 pins botocore as narrowly the other way, so
declaring boto3 made pip try boto3 releases one by one until one fitted aiobotocore's
botocore (docs/install.md). Every call the store makes is botocore's own.

* credentials come from botocore's chain as configured: explicit keys, a named profile,
  and optionally an assumed IAM role (STS AssumeRole, refreshed before it expires);
* every request of a requester-pays store says so (``x-amz-request-payer``);
* before the first request the endpoint is probed with one TCP connection, so a wrong
  endpoint fails in about a second, not after botocore's retries (13-24 s);
* botocore's DEBUG records (its requests' headers, the canonical request it signs, an
  assumed role's credentials) carry secrets: core's log redaction hides them, as in
  every record of the process (``outcommit.redaction``);
* botocore's errors that mean "unreachable", "no or bad credentials", "no such bucket"
  and "access denied" become :class:`~outcommit.errors.StoreError` subclasses whose
  message names the endpoint, the bucket, where the credentials came from (never the
  secret) and the fix. Everything else passes through unchanged (the committers read
  S3's error codes: ``NoSuchUpload``, ``PreconditionFailed``, ``SlowDown``...).
"""

from __future__ import annotations

import functools
import os
import threading
import uuid
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Any

from outcommit.errors import (
    StoreCredentialsError,
    StoreError,
    StoreNotFoundError,
    StorePermissionError,
    StoreUnreachableError,
)
from outcommit.store import connect_once

from .settings import (
    ACCESS_KEY,
    ENDPOINT,
    PROFILE,
    REGION,
    ROLE_ARN,
    SECRET_KEY,
    STORAGE_CLASS,
    S3Settings,
)

_CREDENTIAL_CODES = {"InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidToken",
                     "TokenRefreshRequired", "InvalidClientTokenId", "UnrecognizedClientException"}


# botocore sessions, one per profile and AWS environment: a new session loads botocore's
# service model again (~70-110 ms of CPU), which every task's committer would pay.
_SESSIONS: dict[tuple[str | None, tuple[tuple[str, str], ...]], Any] = {}
_SESSIONS_LOCK = threading.Lock()  # a session is not thread-safe: clients are made under it


def _session_key(profile: str | None) -> tuple[str | None, tuple[tuple[str, str], ...]]:
    """A session resolves credentials from the environment once: a changed one needs another."""
    return profile, tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("AWS_")))


def make_client(settings: S3Settings) -> Any:
    """A thread-safe botocore S3 client for ``settings``, wrapped to translate errors.

    Clients are made from a session shared by the stores of this process with the same
    profile (and AWS environment); each store still gets its own client.
    """
    import botocore.session

    keys: dict[str, Any] = {}
    if settings.access_key or settings.secret_key:
        keys = {"aws_access_key_id": settings.access_key, "aws_secret_access_key": settings.secret_key,
                "aws_session_token": settings.session_token}
    with _SESSIONS_LOCK:
        key = _session_key(settings.profile)
        session = _SESSIONS.get(key)
        if session is None:
            session = botocore.session.Session(profile=settings.profile)
            fast_timestamps(session)
            if len(_SESSIONS) >= 16:  # environments that keep changing: keep a few
                _SESSIONS.clear()
            _SESSIONS[key] = session
        source = describe_source(settings, session)
        if settings.role_arn:
            session, keys = _assumed_role(settings, session, keys), {}
        client = session.create_client("s3", endpoint_url=settings.endpoint_url, region_name=settings.region,
                                config=settings.botocore_config(), **keys)
    if settings.requester_pays:
        client.meta.events.register("before-parameter-build.s3", _requester_pays)
    translated = TranslatingClient(client, settings, source)
    if settings.light_requests:
        translated.light = _light_completer(client, settings, session, keys)
    if settings.probe:
        translated.probe()
    return translated


def _light_completer(client: Any, settings: S3Settings, session: Any, keys: dict[str, Any]) -> Any:
    """The light CompleteMultipartUpload path (``light.py``), with the client's credentials:
    the explicit keys it was made with, else its session's chain (refreshing ones too)."""
    from botocore.credentials import Credentials
    from botocore.utils import get_environ_proxies

    from .light import LightCompleter

    credentials = (Credentials(keys["aws_access_key_id"], keys["aws_secret_access_key"],
                               keys.get("aws_session_token")) if keys else session.get_credentials())
    # botocore's: the AWS ca_bundle (AWS_CA_BUNDLE, the config file), else REQUESTS_CA_BUNDLE
    # (its EndpointCreator), else certifi's roots. Without REQUESTS_CA_BUNDLE a private CA's
    # endpoint that botocore trusted failed the light completions' TLS handshakes.
    verify = session.get_config_variable("ca_bundle") or os.environ.get("REQUESTS_CA_BUNDLE") or True
    # botocore's EndpointCreator: the config's proxies, else the environment's for the endpoint.
    proxies = client.meta.config.proxies or get_environ_proxies(client.meta.endpoint_url)
    # botocore's EndpointCreator: TCP keep-alive from the config, or the AWS config file's
    # tcp_keepalive = true (the light path's connections kept it off, NAT idle timeouts too).
    scoped = session.get_scoped_config() or {}
    keepalive = scoped.get("tcp_keepalive", False)
    keepalive = keepalive if isinstance(keepalive, bool) else str(keepalive).lower() == "true"
    return LightCompleter(client, credentials, verify, settings.max_connections,
                          (settings.connect_timeout, settings.read_timeout),
                          requester_pays=settings.requester_pays, proxies=proxies,
                          proxies_config=client.meta.config.proxies_config, tcp_keepalive=keepalive)


def parse_timestamp(value: Any) -> datetime:
    """S3's two timestamp forms as aware datetimes, without dateutil; anything else as
    botocore parses it.

    botocore's default parser hands every timestamp to dateutil: a listing page of 1,000
    keys spent 53% of its client CPU (35 ms of 66) parsing ``LastModified``. S3 writes
    ISO 8601 in UTC in XML bodies (``2026-11-27T22:20:35.000Z``) and RFC 1123 in headers
    (``Fri, 27 Nov 2026 22:20:35 GMT``): the standard library parses both exactly.
    """
    if isinstance(value, str):
        try:
            if value.endswith("Z") and "T" in value:
                return datetime.fromisoformat(value[:-1]).replace(tzinfo=timezone.utc)
            if value.endswith(" GMT"):
                return parsedate_to_datetime(value)
        except (ValueError, TypeError):
            pass  # another form: botocore's parser below
    from botocore.utils import parse_timestamp as botocore_parse

    return botocore_parse(value)  # type: ignore[no-any-return]


def fast_timestamps(session: Any) -> None:
    """Make the clients ``session`` creates parse timestamps with :func:`parse_timestamp`:
    botocore's documented switch (its response parser factory's ``timestamp_parser``)."""
    session.get_component("response_parser_factory").set_parser_defaults(timestamp_parser=parse_timestamp)


def _requester_pays(params: dict[str, Any], model: Any, **_: Any) -> None:
    if "RequestPayer" in model.input_shape.members:
        params.setdefault("RequestPayer", "requester")


def _assumed_role(settings: S3Settings, session: Any, keys: dict[str, Any]) -> Any:
    """A session signing with the assumed role's credentials, refreshed before they expire."""
    from botocore.credentials import CredentialProvider, CredentialResolver, RefreshableCredentials
    from botocore.session import get_session

    sts = session.create_client("sts", endpoint_url=settings.role_sts_endpoint, region_name=settings.region,
                         config=settings.botocore_config(), **keys)
    name = settings.role_session_name or f"outcommit-{uuid.uuid4().hex[:12]}"

    def fetch() -> dict[str, str]:
        try:
            credentials = sts.assume_role(RoleArn=settings.role_arn, RoleSessionName=name)["Credentials"]
        except Exception as exc:
            raise StoreCredentialsError(
                f"could not assume the role {settings.role_arn} ({ROLE_ARN}): {exc}. Check that "
                "the credentials found otherwise may assume it (its trust policy)") from exc
        return {"access_key": credentials["AccessKeyId"], "secret_key": credentials["SecretAccessKey"],
                "token": credentials["SessionToken"],
                "expiry_time": credentials["Expiration"].isoformat()}

    credentials = RefreshableCredentials.create_from_metadata(fetch(), fetch, "assume-role")

    class AssumedRole(CredentialProvider):  # type: ignore[misc]
        """The assumed role's credentials, as botocore's credential chain asks for them."""

        METHOD = "assume-role"
        CANONICAL_NAME = "outcommit-assume-role"

        def load(self) -> Any:
            return credentials

    botocore_session = get_session()
    fast_timestamps(botocore_session)
    # The session's credential chain replaced by this one provider, through botocore's
    # public components (not its private ``_credentials``): they refresh themselves.
    botocore_session.register_component("credential_provider", CredentialResolver([AssumedRole()]))
    return botocore_session


def describe_source(settings: S3Settings, session: Any) -> str:
    """Where the credentials come from, safe to show: never a secret, at most the key id's tail."""
    if settings.access_key:
        where = f"keys in the configuration ({ACCESS_KEY}, ...{settings.access_key[-4:]})"
    else:
        found = session.get_credentials()
        method = getattr(found, "method", None) if found is not None else None
        where = {"env": "environment variables (AWS_ACCESS_KEY_ID)",
                 "shared-credentials-file": "the shared credentials file (~/.aws/credentials)",
                 "config-file": "the AWS config file (~/.aws/config)",
                 "iam-role": "the instance's IAM role", "container-role": "the container's role",
                 "sso": "AWS SSO"}.get(str(method), str(method)) if method else "none found"
        if settings.profile:
            where += f", profile {settings.profile!r} ({PROFILE})"
    if settings.role_arn:
        where += f", then the assumed role {settings.role_arn}"
    return where


class TranslatingClient:
    """A botocore client whose calls raise StoreErrors for what a user must fix."""

    def __init__(self, client: Any, settings: S3Settings, source: str) -> None:
        self._client = client
        self._settings = settings
        self.credential_source = source
        self.light: Any = None  # outcommit.s3.light-requests: a light.LightCompleter

    def complete_multipart_upload(self, **kwargs: Any) -> Any:
        """botocore's call, or the light path's when it is on and takes this request."""
        if self.light is None:
            return self.__getattr__("complete_multipart_upload")(**kwargs)
        try:
            answer = self.light.complete(kwargs)
        except StoreError:
            raise
        except Exception as exc:
            translated = self.translate(exc, "complete_multipart_upload", kwargs.get("Bucket"),
                                        kwargs.get("Key"))
            if translated is None:
                raise
            raise translated from exc
        return answer if answer is not None else self.__getattr__("complete_multipart_upload")(**kwargs)

    def close(self) -> None:
        """botocore's client's connections, and the light path's pool of its own."""
        try:
            if self.light is not None:
                self.light.close()
        finally:
            self._client.close()

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._client, name)
        if name in ("meta", "exceptions") or not callable(attribute):
            return attribute

        @functools.wraps(attribute)
        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return attribute(*args, **kwargs)
            except StoreError:
                raise
            except Exception as exc:
                translated = self.translate(exc, name, kwargs.get("Bucket"), kwargs.get("Key"))
                if translated is None:
                    raise
                raise translated from exc
        return call

    @property
    def endpoint(self) -> str:
        return str(self._client.meta.endpoint_url)

    def probe(self) -> None:
        """One TCP connection to the endpoint: refused or unresolvable fails now, clearly."""
        try:
            connect_once(self.endpoint, self._settings.connect_timeout)
        except OSError as exc:
            raise StoreUnreachableError(
                f"cannot reach the S3 endpoint {self.endpoint} ({type(exc).__name__}: {exc}, within "
                f"{self._settings.connect_timeout:g} s): check {ENDPOINT} (Hadoop fs.s3a.endpoint) "
                f"and {REGION}, and that the service is up and reachable from here") from exc

    def translate(self, exc: BaseException, operation: str, bucket: Any, key: Any) -> StoreError | None:
        """The error to raise for ``exc``, saying what to fix; None: raise ``exc`` as it is."""
        where = f"s3://{bucket}/{key or ''}" if bucket else "S3"
        context = (f"{where} (endpoint {self.endpoint}, region {self._settings.region}; "
                   f"credentials: {self.credential_source})")
        error = self._transport_error(exc, context)
        if error is None:
            response = getattr(exc, "response", None)
            if not isinstance(response, dict):
                return None
            code = str(response.get("Error", {}).get("Code", ""))
            error = self._service_error(code, operation, bucket, where, context)
            if error is None:
                return None
        error.response = response if (response := getattr(exc, "response", None)) else {}  # type: ignore[attr-defined]
        return error

    def _transport_error(self, exc: BaseException, context: str) -> StoreError | None:
        """No TLS, no connection, no credentials: botocore's exceptions before any answer."""
        from botocore.exceptions import (
            ConnectTimeoutError,
            EndpointConnectionError,
            NoCredentialsError,
            PartialCredentialsError,
            SSLError,
        )

        if isinstance(exc, SSLError):
            # Not a ConnectionError: the committers' retries would only repeat it.
            reason = str(exc)
            if "CERTIFICATE_VERIFY_FAILED" in reason:
                fix = ("the server's certificate is not trusted here: give its CA bundle "
                       "(AWS_CA_BUNDLE, or ca_bundle in the AWS config file)")
            elif "WRONG_VERSION_NUMBER" in reason or "UNKNOWN_PROTOCOL" in reason:
                fix = (f"the endpoint does not speak TLS: if it serves plain HTTP, write it with "
                       f"http:// in {ENDPOINT} (Hadoop fs.s3a.endpoint, or "
                       "fs.s3a.connection.ssl.enabled=false)")
            else:
                fix = f"check {ENDPOINT} (Hadoop fs.s3a.endpoint) and the TLS settings"
            return StoreError(f"no TLS connection to {context}: {exc}. {fix}")
        if isinstance(exc, (EndpointConnectionError, ConnectTimeoutError)):
            return StoreUnreachableError(
                f"cannot reach {context}: {exc}. Check {ENDPOINT} (Hadoop fs.s3a.endpoint)")
        if isinstance(exc, (NoCredentialsError, PartialCredentialsError)):
            return StoreCredentialsError(
                f"no AWS credentials for {context}: set {ACCESS_KEY} and {SECRET_KEY} (Hadoop "
                f"fs.s3a.access.key/secret.key), or {PROFILE}, or provide them the usual AWS ways "
                "(environment, ~/.aws files, an instance or container role)")
        return None

    def _service_error(self, code: str, operation: str, bucket: Any, where: str,
                       context: str) -> StoreError | None:
        """The service's answer ``code``, where it has a fix to name."""
        if code in _CREDENTIAL_CODES:
            return StoreCredentialsError(
                f"S3 rejected the credentials for {context}: {code}. Check the access key, "
                "secret and session token, and the region")
        if code == "NoSuchBucket":
            return StoreNotFoundError(
                f"the bucket {bucket!r} does not exist at {self.endpoint} (region "
                f"{self._settings.region}): create it, or fix the destination URL")
        if code in ("AccessDenied", "AllAccessDisabled"):
            return StorePermissionError(
                f"access denied ({code}) for {operation} on {context}: the credentials may not "
                f"do {operation} there; grant it in the bucket or IAM policy")
        if code == "InvalidStorageClass":
            return StoreError(
                f"{self.endpoint} refused the storage class {self._settings.storage_class!r} "
                f"for {operation} on {where}: set {STORAGE_CLASS} to one the store offers")
        if code == "403" and operation.startswith("head_"):  # a HEAD answer has no body
            return StorePermissionError(
                f"S3 answered 403 Forbidden to {operation} on {context}, without a reason (a HEAD "
                "carries none): the credentials are rejected, or may not read there (without "
                "s3:ListBucket S3 also answers 403 for a key that does not exist). Check the "
                "access key, secret, session token and region, and the bucket or IAM policy")
        if code == "400" and operation.startswith("head_"):
            return StoreError(
                f"S3 answered 400 Bad Request to {operation} on {context}, without a reason (a "
                f"HEAD carries none): often a region ({REGION}) that is not the bucket's, or an "
                f"endpoint ({ENDPOINT}) that is not S3")
        return None
