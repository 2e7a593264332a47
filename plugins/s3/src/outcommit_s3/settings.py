"""Configuration keys of the S3 plugin and how they become client options.

Every setting has an ``outcommit.s3.`` name; the connection settings also accept
Hadoop's ``fs.s3a.`` names (a Spark user sets ``spark.hadoop.fs.s3a.*``, which the
Config reduces to ``fs.s3a.*``). Anything unset falls back to boto3's usual sources
(environment variables, ``~/.aws``, instance roles). Secrets never reach a log: callers
log ``describe()``, which leaves them out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from outcommit import Config
from outcommit.multipart import DEFAULT_PART_SIZE

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
STAGING_DIR = "outcommit.s3.staging.tmp-dir"
STAGING_SHARED_DIR = "outcommit.s3.staging.shared-dir"
INLINE_LIMIT = "outcommit.s3.message.inline-commits"
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
    # Keys of core that Hadoop spells the S3A way.
    "outcommit.committer.threads": "fs.s3a.committer.threads",
    "outcommit.committer.conflict-mode": "fs.s3a.committer.staging.conflict-mode",
    "outcommit.committer.unique-filenames": "fs.s3a.committer.staging.unique-filenames",
}
SSL_ENABLED_HADOOP = "fs.s3a.connection.ssl.enabled"

KEYS: dict[str, str] = {
    ENDPOINT: "S3 endpoint URL (default: AWS, or AWS_ENDPOINT_URL); Hadoop: fs.s3a.endpoint",
    ACCESS_KEY: "access key id (default: the usual AWS sources); Hadoop: fs.s3a.access.key",
    SECRET_KEY: "secret access key, never logged; Hadoop: fs.s3a.secret.key",
    SESSION_TOKEN: "session token, never logged; Hadoop: fs.s3a.session.token",
    REGION: "region (default: AWS_REGION or us-east-1); Hadoop: fs.s3a.endpoint.region",
    PATH_STYLE: "true: path-style addressing (MinIO, moto); Hadoop: fs.s3a.path.style.access",
    MAX_ATTEMPTS: "attempts per request incl. retries (default 5); Hadoop: fs.s3a.attempts.maximum",
    MAX_CONNECTIONS: "HTTP connection pool size (default 64); Hadoop: fs.s3a.connection.maximum",
    PART_SIZE: "multipart part size in bytes, >= 5 MiB (default 16 MiB); Hadoop: fs.s3a.multipart.size",
    ABORT_PENDING: "job commit/abort/cleanup abort every pending upload under the destination "
                   "(default true); Hadoop: fs.s3a.committer.abort.pending.uploads",
    STAGING_DIR: "local directory of the staging committers' task output (default: system temp)",
    STAGING_SHARED_DIR: "URL of the shared directory for staging pendingsets (default: the "
                        "destination's __staging_job-<jobId> directory)",
    INLINE_LIMIT: "task commit messages carry their commits inline up to this many files, "
                  "else a digest-checked reference to the pendingset (default 200)",
    S3A_COMMITTER_NAME: "Hadoop's fs.s3a.committer.name for s3:// and s3a://: file, directory, "
                        "partitioned or magic",
    MAGIC_IN_MEMORY: "magic: keep a task's uploads in the memory of the process that set the task "
                     "up (default true); false: every writer saves .pending files (writers in "
                     "several processes)",
    MAGIC_UPLOAD_THREADS: "magic: per task attempt, parts and small files uploaded in the "
                          "background at once (default 4; their bytes bound the memory)",
}
KEYS[SSL_ENABLED_HADOOP] = "Hadoop: false makes a scheme-less fs.s3a.endpoint http://"

MIN_PART_SIZE = 5 * 1024 * 1024


def setting(config: Config, key: str) -> str | None:
    """The value of an ``outcommit.s3.`` key (or of its Hadoop alias), stripped."""
    value = config.get_str(key)
    return value.strip() if isinstance(value, str) else value


def _size(value: str) -> int:
    """Hadoop-style sizes: ``67108864``, ``64M``, ``5m``, ``1G``."""
    text = value.strip().upper().removesuffix("B")
    factor = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    number = text[:-1] if factor > 1 else text
    return int(number) * factor


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

    @classmethod
    def from_config(cls, config: Config) -> S3Settings:
        import os

        from outcommit import ConfigError

        endpoint = setting(config, ENDPOINT)
        if endpoint and "://" not in endpoint:
            ssl = config.get_bool(SSL_ENABLED_HADOOP, True)
            endpoint = f"{'https' if ssl else 'http'}://{endpoint}"
        path_style = setting(config, PATH_STYLE)
        part_size_text = setting(config, PART_SIZE)
        try:
            part_size = _size(part_size_text) if part_size_text else DEFAULT_PART_SIZE
        except ValueError:
            raise ConfigError(f"{PART_SIZE}={part_size_text!r} is not a size (e.g. 16777216 or 16M)") \
                from None
        if part_size < MIN_PART_SIZE:
            raise ConfigError(f"{PART_SIZE}={part_size} is below S3's minimum part size "
                              f"{MIN_PART_SIZE} (5 MiB)")
        attempts = setting(config, MAX_ATTEMPTS)
        connections = setting(config, MAX_CONNECTIONS)
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
            part_size=part_size,
            abort_pending_uploads=config.get_bool(ABORT_PENDING, True),
        )

    def describe(self) -> dict[str, Any]:
        """Safe to log: no secrets, only whether they are set."""
        return {"endpoint": self.endpoint_url or "(default)", "region": self.region,
                "path_style": self.path_style, "access_key_set": self.access_key is not None,
                "max_attempts": self.max_attempts, "part_size": self.part_size}

    def __repr__(self) -> str:  # a stray repr in a log or traceback must not carry the secret
        return f"S3Settings({self.describe()!r})"

    def boto3_client(self) -> Any:
        """A boto3 S3 client: thread-safe, one per store."""
        import boto3
        from botocore.config import Config as BotoConfig

        session = boto3.session.Session()
        options: dict[str, Any] = {
            "retries": {"total_max_attempts": self.max_attempts, "mode": "standard"},
            "max_pool_connections": self.max_connections,
        }
        if self.path_style:
            options["s3"] = {"addressing_style": "path"}
        return session.client(
            "s3", endpoint_url=self.endpoint_url, region_name=self.region,
            aws_access_key_id=self.access_key, aws_secret_access_key=self.secret_key,
            aws_session_token=self.session_token, config=BotoConfig(**options))

    def s3fs_options(self) -> dict[str, Any]:
        """Options of the s3fs filesystem (readers and writers through fsspec)."""
        options: dict[str, Any] = {
            # A listing cache would miss objects completed by another client (our job commit).
            "use_listings_cache": False,
            "skip_instance_cache": True,
            "config_kwargs": {"retries": {"total_max_attempts": self.max_attempts, "mode": "standard"},
                              "max_pool_connections": self.max_connections},
        }
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
