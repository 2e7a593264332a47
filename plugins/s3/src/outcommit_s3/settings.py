"""Configuration keys of the S3 plugin and how they become client options.

Every setting has an ``outcommit.s3.`` name; the connection settings also accept
Hadoop's ``fs.s3a.`` names (a Spark user sets ``spark.hadoop.fs.s3a.*``, which the
Config reduces to ``fs.s3a.*``). Anything unset falls back to boto3's usual sources
(environment variables, ``~/.aws``, instance roles). Secrets never reach a log: callers
log ``describe()``, which leaves them out.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from typing import Any

from outcommit import Config
from outcommit.multipart import DEFAULT_PART_SIZE, JOB_COMMIT_SIDE_REQUESTS

log = logging.getLogger(__name__)

#: The schemes the plugin registers its store for, and so the only ones its committers are
#: made for (``Committer.made_for``): a store of another plugin may declare S3's
#: capabilities, but its uploads are not S3's and pendingsets would name s3a:// URIs there.
SCHEMES = ("s3", "s3a")

ENDPOINT = "outcommit.s3.endpoint"
ACCESS_KEY = "outcommit.s3.access-key"
SECRET_KEY = "outcommit.s3.secret-key"
SESSION_TOKEN = "outcommit.s3.session-token"
REGION = "outcommit.s3.region"
PATH_STYLE = "outcommit.s3.path-style-access"
MAX_ATTEMPTS = "outcommit.s3.retry.max-attempts"
MAX_CONNECTIONS = "outcommit.s3.connection.maximum"
PART_SIZE = "outcommit.s3.multipart.part-size"
ABORT_PENDING = "outcommit.s3.abort-pending-uploads"
ABORT_PENDING_SCOPE = "outcommit.s3.abort-pending-uploads.scope"
STAGING_DIR = "outcommit.s3.staging.tmp-dir"
STAGING_SHARED_DIR = "outcommit.s3.staging.shared-dir"
INLINE_LIMIT = "outcommit.s3.message.inline-commits"
ENCRYPTION_ALGORITHM = "outcommit.s3.encryption.algorithm"
ENCRYPTION_KEY = "outcommit.s3.encryption.key"
ACL = "outcommit.s3.acl"
STORAGE_CLASS = "outcommit.s3.storage-class"
REQUESTER_PAYS = "outcommit.s3.requester-pays"
PROFILE = "outcommit.s3.profile"
ROLE_ARN = "outcommit.s3.assumed-role.arn"
ROLE_SESSION_NAME = "outcommit.s3.assumed-role.session-name"
ROLE_STS_ENDPOINT = "outcommit.s3.assumed-role.sts-endpoint"
CONNECT_TIMEOUT = "outcommit.s3.connection.establish-timeout"
READ_TIMEOUT = "outcommit.s3.connection.timeout"
PROBE = "outcommit.s3.connection.probe"
LIGHT_REQUESTS = "outcommit.s3.light-requests"
MAGIC_IN_MEMORY = "outcommit.magic.track-commits-in-memory"
MAGIC_UPLOAD_THREADS = "outcommit.magic.upload-threads"

S3A_COMMITTER_NAME = "outcommit.s3a.committer.name"

# Hadoop's names for the same settings (an explicit outcommit. key wins); registered as
# configuration aliases through the plugin hook, so every Config resolves them.
HADOOP_ALIASES = {
    ENDPOINT: "fs.s3a.endpoint",
    ACCESS_KEY: "fs.s3a.access.key",
    SECRET_KEY: "fs.s3a.secret.key",
    SESSION_TOKEN: "fs.s3a.session.token",
    REGION: "fs.s3a.endpoint.region",
    PATH_STYLE: "fs.s3a.path.style.access",
    MAX_ATTEMPTS: "fs.s3a.attempts.maximum",
    MAX_CONNECTIONS: "fs.s3a.connection.maximum",
    PART_SIZE: "fs.s3a.multipart.size",
    STAGING_DIR: "fs.s3a.buffer.dir",
    ABORT_PENDING: "fs.s3a.committer.abort.pending.uploads",
    S3A_COMMITTER_NAME: "fs.s3a.committer.name",
    MAGIC_IN_MEMORY: "fs.s3a.committer.magic.track.commits.in.memory.enabled",
    ENCRYPTION_ALGORITHM: "fs.s3a.encryption.algorithm",
    ENCRYPTION_KEY: "fs.s3a.encryption.key",
    ACL: "fs.s3a.acl.default",
    STORAGE_CLASS: "fs.s3a.create.storage.class",
    REQUESTER_PAYS: "fs.s3a.requester.pays.enabled",
    ROLE_ARN: "fs.s3a.assumed.role.arn",
    ROLE_SESSION_NAME: "fs.s3a.assumed.role.session.name",
    ROLE_STS_ENDPOINT: "fs.s3a.assumed.role.sts.endpoint",
    CONNECT_TIMEOUT: "fs.s3a.connection.establish.timeout",
    READ_TIMEOUT: "fs.s3a.connection.timeout",
    # Keys of core that Hadoop spells the S3A way.
    "outcommit.committer.threads": "fs.s3a.committer.threads",
    "outcommit.committer.conflict-mode": "fs.s3a.committer.staging.conflict-mode",
    "outcommit.committer.unique-filenames": "fs.s3a.committer.staging.unique-filenames",
    "outcommit.summary-report-dir": "fs.s3a.committer.summary.report.directory",
}
SSL_ENABLED_HADOOP = "fs.s3a.connection.ssl.enabled"
#: Credentials: never logged, shown or written (declared to core's redaction).
SECRET_KEYS = frozenset({SECRET_KEY, SESSION_TOKEN})

KEYS: dict[str, str] = {
    ENDPOINT: "S3 endpoint URL (default: AWS, or AWS_ENDPOINT_URL); Hadoop: fs.s3a.endpoint",
    ACCESS_KEY: "access key id (default: the usual AWS sources); Hadoop: fs.s3a.access.key",
    SECRET_KEY: "secret access key, never logged; Hadoop: fs.s3a.secret.key",
    SESSION_TOKEN: "session token, never logged; Hadoop: fs.s3a.session.token",
    REGION: "region (default: AWS_REGION or us-east-1); Hadoop: fs.s3a.endpoint.region",
    PATH_STYLE: "true: path-style addressing (MinIO, moto); Hadoop: fs.s3a.path.style.access",
    MAX_ATTEMPTS: "attempts per request incl. retries (default 5); Hadoop: fs.s3a.attempts.maximum",
    MAX_CONNECTIONS: "HTTP connection pool size (default 64), also the committers' default threads "
                     "(the pool keeps 2 more for job commit's requests beside its completions); "
                     "Hadoop: fs.s3a.connection.maximum",
    PART_SIZE: "multipart part size in bytes, >= 5 MiB (default 16 MiB); Hadoop: fs.s3a.multipart.size",
    ABORT_PENDING: "job commit/abort/cleanup abort every pending upload under the destination "
                   "that no live job owns (default true; which ones: "
                   "outcommit.s3.abort-pending-uploads.scope); Hadoop: "
                   "fs.s3a.committer.abort.pending.uploads",
    ABORT_PENDING_SCOPE: "which pending uploads that sweep aborts: all (default, as Hadoop) or "
                         "before-job: spare every upload S3 says was initiated at or after the job's "
                         "start (the Last-Modified of its _job.json marker) less 5 seconds",
    STAGING_DIR: "local directory of the staging committers' task output (default: system temp)",
    STAGING_SHARED_DIR: "URL of the shared directory for staging pendingsets (default: the "
                        "destination's __staging_job-<jobId> directory)",
    INLINE_LIMIT: "task commit messages carry their commits inline up to this many files, "
                  "else a digest-checked reference to the pendingset (default 200)",
    S3A_COMMITTER_NAME: "Hadoop's fs.s3a.committer.name for s3:// and s3a://: file, directory, "
                        "partitioned or magic",
    ENCRYPTION_ALGORITHM: "server-side encryption of every object created: SSE-S3, SSE-KMS or "
                          "DSSE-KMS (default: the bucket's)",
    ENCRYPTION_KEY: "KMS key id or ARN for SSE-KMS/DSSE-KMS (default: the account's aws/s3 key)",
    ACL: "canned ACL of every object created, e.g. bucket-owner-full-control (Hadoop's "
         "BucketOwnerFullControl spelling works too)",
    STORAGE_CLASS: "storage class of every object created: standard, intelligent_tiering, "
                   "standard_ia, onezone_ia, glacier_ir, ...",
    REQUESTER_PAYS: "true: every request says the requester pays (requester-pays buckets)",
    PROFILE: "named profile of the AWS config files (default: AWS_PROFILE, boto3's chain)",
    ROLE_ARN: "assume this IAM role (STS AssumeRole) with the credentials found otherwise",
    ROLE_SESSION_NAME: "session name of the assumed role (default outcommit-<random>)",
    ROLE_STS_ENDPOINT: "STS endpoint for the assumed role (default: AWS's; an emulator's URL)",
    CONNECT_TIMEOUT: "seconds (or 5s, 500ms) to establish a connection (default 5)",
    READ_TIMEOUT: "seconds (or 60s, 2m) to wait for an answer (default 60)",
    PROBE: "true (default): before the first request, check the endpoint accepts connections, so a "
           "wrong endpoint fails in a second with a clear error instead of after retries",
    LIGHT_REQUESTS: "CompleteMultipartUpload (job commit's request per file) signed and sent "
                    "without botocore's client machinery, with its credentials, address, signer, "
                    "HTTP session and retry handlers (about half of that request's client CPU; "
                    "docs/performance.md); false: through botocore's client (default true)",
    MAGIC_IN_MEMORY: "magic: keep a task's uploads in the memory of the process that set the task "
                     "up (default true); false: every writer saves .pending files (writers in "
                     "several processes)",
    MAGIC_UPLOAD_THREADS: "magic: per task attempt, parts' worth of bytes uploaded in the "
                          "background at once (default 4: the memory bound); uploads starting "
                          "and small files run as many requests at once as "
                          "outcommit.committer.threads (the connections), at least 4x it",
}
KEYS[SSL_ENABLED_HADOOP] = ("Hadoop: a scheme-less fs.s3a.endpoint is https:// (true) or http:// "
                             "(false); unset, such an endpoint is refused: write its scheme")

MIN_PART_SIZE = 5 * 1024 * 1024


def setting(config: Config, key: str) -> str | None:
    """The value of an ``outcommit.s3.`` key (or of its Hadoop alias), stripped."""
    value = config.get_str(key)
    return value.strip() if isinstance(value, str) else value


def _seconds(key: str, value: str | None, default: float) -> float:
    """Hadoop-style durations: ``5`` (seconds), ``500ms``, ``5s``, ``2m``."""
    if value is None or not value.strip():
        return default
    text = value.strip().lower()
    for unit, factor in (("ms", 0.001), ("s", 1.0), ("m", 60.0), ("h", 3600.0)):
        if text.endswith(unit) and text[:-len(unit)].replace(".", "", 1).isdigit():
            return float(text[:-len(unit)]) * factor
    try:
        return float(text)
    except ValueError:
        from outcommit import ConfigError

        raise ConfigError(f"{key}={value!r} is not a duration (e.g. 5, 500ms, 5s, 2m)") from None


# Hadoop's names of the algorithms -> S3's ServerSideEncryption values.
_ENCRYPTION = {"sse-s3": "AES256", "aes256": "AES256", "sse-kms": "aws:kms", "aws:kms": "aws:kms",
               "dsse-kms": "aws:kms:dsse", "aws:kms:dsse": "aws:kms:dsse", "none": "", "": ""}
# Hadoop's CannedAccessControlList names -> S3's canned ACLs.
_ACLS = {"private": "private", "publicread": "public-read", "publicreadwrite": "public-read-write",
         "authenticatedread": "authenticated-read", "awsexecread": "aws-exec-read",
         "bucketownerread": "bucket-owner-read", "bucketownerfullcontrol": "bucket-owner-full-control",
         "logdeliverywrite": "log-delivery-write"}


def _size(value: str) -> int:
    """Hadoop-style sizes: ``67108864``, ``64M``, ``5m``, ``1G``."""
    text = value.strip().upper().removesuffix("B")
    factor = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    number = text[:-1] if factor > 1 else text
    return int(number) * factor


@functools.lru_cache(maxsize=1)
def _storage_classes() -> tuple[str, ...]:
    """The storage classes botocore's S3 model knows (read once, when one is configured):
    a misspelled one failed only at the first upload, with S3's InvalidStorageClass."""
    import botocore.session

    shape = botocore.session.get_session().get_service_model("s3").shape_for("StorageClass")
    return tuple(shape.enum)


def _endpoint(config: Config) -> str | None:
    """The endpoint as a URL; Hadoop's scheme-less form only with its SSL key set."""
    from outcommit import ConfigError

    endpoint = setting(config, ENDPOINT)
    if endpoint and "://" not in endpoint:
        if config.get_str(SSL_ENABLED_HADOOP) is None:
            # Hadoop would use https: against a plain-HTTP server (MinIO, moto on a laptop)
            # every request then failed its TLS handshake, retried, for 9-12 s.
            raise ConfigError(f"{config.spelled(ENDPOINT)}={endpoint!r} has no scheme: add http:// "
                              f"or https:// (http://{endpoint} for a plain-HTTP server such as MinIO "
                              f"or moto), or set {SSL_ENABLED_HADOOP} as Hadoop's S3A would read it")
        ssl = config.get_bool(SSL_ENABLED_HADOOP, True)
        endpoint = f"{'https' if ssl else 'http'}://{endpoint}"
    return endpoint


def _part_size(config: Config) -> int:
    from outcommit import ConfigError

    part_size_text = setting(config, PART_SIZE)
    try:
        part_size = _size(part_size_text) if part_size_text else DEFAULT_PART_SIZE
    except ValueError:
        raise ConfigError(f"{PART_SIZE}={part_size_text!r} is not a size (e.g. 16777216 or 16M)") \
            from None
    if part_size < MIN_PART_SIZE:
        raise ConfigError(f"{PART_SIZE}={part_size} is below S3's minimum part size "
                          f"{MIN_PART_SIZE} (5 MiB)")
    return part_size


def _object_options(config: Config, endpoint: str | None) -> tuple[str, str | None, str | None]:
    """Encryption algorithm, canned ACL and storage class, checked before any upload."""
    from outcommit import ConfigError

    algorithm = (setting(config, ENCRYPTION_ALGORITHM) or "").lower()
    if algorithm == "sse-c":
        raise ConfigError(f"{ENCRYPTION_ALGORITHM}=SSE-C (customer-provided keys) is not supported: "
                          "use SSE-S3 or SSE-KMS")
    if algorithm not in _ENCRYPTION:
        raise ConfigError(f"{ENCRYPTION_ALGORITHM}={algorithm!r}: use SSE-S3, SSE-KMS or DSSE-KMS")
    acl = setting(config, ACL)
    if acl and acl.replace("-", "").lower() not in _ACLS:
        raise ConfigError(f"{ACL}={acl!r}: use a canned ACL such as bucket-owner-full-control, "
                          f"private ({', '.join(sorted(set(_ACLS.values())))})")
    storage_class = setting(config, STORAGE_CLASS)
    if storage_class and storage_class.upper() not in _storage_classes():
        known = ", ".join(c.lower() for c in _storage_classes())
        if not endpoint:  # AWS: a class its model does not know fails every upload
            raise ConfigError(f"{STORAGE_CLASS}={storage_class!r}: use one of {known}")
        # S3-compatible stores have classes of their own (Ceph RGW placement targets).
        log.warning("%s=%r is not one of AWS's storage classes (%s): sent as given to %s",
                    STORAGE_CLASS, storage_class, known, endpoint)
    return algorithm, acl, storage_class


@dataclass(frozen=True)
class S3Settings:
    """Resolved connection and upload settings of one store."""

    endpoint_url: str | None
    access_key: str | None
    secret_key: str | None
    session_token: str | None
    region: str
    path_style: bool
    max_attempts: int
    max_connections: int
    part_size: int
    abort_pending_uploads: bool
    encryption: str = ""          # S3's ServerSideEncryption value, "" for the bucket default
    encryption_key: str | None = None
    acl: str | None = None
    storage_class: str | None = None
    requester_pays: bool = False
    profile: str | None = None
    role_arn: str | None = None
    role_session_name: str | None = None
    role_sts_endpoint: str | None = None
    connect_timeout: float = 5.0
    read_timeout: float = 60.0
    probe: bool = True
    light_requests: bool = True

    @classmethod
    def from_config(cls, config: Config) -> S3Settings:
        import os

        endpoint = _endpoint(config)
        path_style = setting(config, PATH_STYLE)
        attempts = setting(config, MAX_ATTEMPTS)
        connections = setting(config, MAX_CONNECTIONS)
        algorithm, acl, storage_class = _object_options(config, endpoint)
        return cls(
            endpoint_url=endpoint or None,
            access_key=setting(config, ACCESS_KEY) or None,
            secret_key=setting(config, SECRET_KEY) or None,
            session_token=setting(config, SESSION_TOKEN) or None,
            region=setting(config, REGION) or os.environ.get("AWS_REGION")
            or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1",
            path_style=(path_style or "false").lower() in ("true", "1", "yes"),
            max_attempts=max(1, int(attempts)) if attempts else 5,
            max_connections=max(1, int(connections)) if connections else 64,
            part_size=_part_size(config),
            abort_pending_uploads=config.get_bool(ABORT_PENDING, True),
            encryption=_ENCRYPTION[algorithm],
            encryption_key=setting(config, ENCRYPTION_KEY) or None,
            acl=_ACLS[acl.replace("-", "").lower()] if acl else None,
            storage_class=storage_class.upper() if storage_class else None,
            requester_pays=config.get_bool(REQUESTER_PAYS, False),
            profile=setting(config, PROFILE) or None,
            role_arn=setting(config, ROLE_ARN) or None,
            role_session_name=setting(config, ROLE_SESSION_NAME) or None,
            role_sts_endpoint=setting(config, ROLE_STS_ENDPOINT) or None,
            connect_timeout=_seconds(CONNECT_TIMEOUT, setting(config, CONNECT_TIMEOUT), 5.0),
            read_timeout=_seconds(READ_TIMEOUT, setting(config, READ_TIMEOUT), 60.0),
            probe=config.get_bool(PROBE, True),
            light_requests=config.get_bool(LIGHT_REQUESTS, True),
        )


    def object_args(self) -> dict[str, str]:
        """Parameters of every request that creates an object (PUT, CreateMultipartUpload, copy)."""
        args: dict[str, str] = {}
        if self.encryption:
            args["ServerSideEncryption"] = self.encryption
            if self.encryption_key and self.encryption != "AES256":
                args["SSEKMSKeyId"] = self.encryption_key
        if self.acl:
            args["ACL"] = self.acl
        if self.storage_class:
            args["StorageClass"] = self.storage_class
        return args

    def describe(self) -> dict[str, Any]:
        """Safe to log: no secrets, only whether they are set."""
        return {"endpoint": self.endpoint_url or "(default)", "region": self.region,
                "path_style": self.path_style, "access_key_set": self.access_key is not None,
                "profile": self.profile, "role": self.role_arn, "encryption": self.encryption or None,
                "max_attempts": self.max_attempts, "part_size": self.part_size}

    def __repr__(self) -> str:  # a stray repr in a log or traceback must not carry the secret
        return f"S3Settings({self.describe()!r})"

    def botocore_config(self) -> Any:
        from botocore.config import Config as BotoConfig

        options: dict[str, Any] = {
            "retries": {"total_max_attempts": self.max_attempts, "mode": "standard"},
            # The committers' threads default to max_connections: job commit's requests
            # beside its completions need connections of their own.
            "max_pool_connections": self.max_connections + JOB_COMMIT_SIDE_REQUESTS,
            "connect_timeout": self.connect_timeout, "read_timeout": self.read_timeout,
        }
        if self.path_style:
            options["s3"] = {"addressing_style": "path"}
        return BotoConfig(**options)

    def s3fs_options(self) -> dict[str, Any]:
        """Options of the s3fs filesystem (readers and writers through fsspec)."""
        options: dict[str, Any] = {
            # A listing cache would miss objects completed by another client (our job commit).
            "use_listings_cache": False,
            "skip_instance_cache": True,
            "config_kwargs": {"retries": {"total_max_attempts": self.max_attempts, "mode": "standard"},
                              "max_pool_connections": self.max_connections,
                              "connect_timeout": self.connect_timeout,
                              "read_timeout": self.read_timeout},
        }
        if self.object_args():
            options["s3_additional_kwargs"] = self.object_args()
        if self.requester_pays:
            options["requester_pays"] = True
        if self.profile:
            options["profile"] = self.profile
        if self.path_style:
            options["config_kwargs"]["s3"] = {"addressing_style": "path"}
        if self.endpoint_url:
            options["endpoint_url"] = self.endpoint_url
        if self.access_key:
            options["key"] = self.access_key
        if self.secret_key:
            options["secret"] = self.secret_key
        if self.session_token:
            options["token"] = self.session_token
        # No client_kwargs region: with a custom endpoint s3fs then fails bucket creation.
        if not self.endpoint_url:
            options["client_kwargs"] = {"region_name": self.region}
        return options
