"""An embedded S3 server (moto) for demos and tests, reachable through outcommit's config.

    server = start_moto_server(buckets=["demo"])
    committer = outcommit.create_committer("s3://demo/table", server.config)
    ...
    server.stop()

Needs ``moto[server]`` (the ``outcommit-s3[embedded]`` extra). The server listens on
127.0.0.1 on a free port, in this process, and keeps everything in memory.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from outcommit.install import install_command

DUMMY_KEY = "testing"
DUMMY_SECRET = "testing"  # moto accepts any credentials; never a real secret
REGION = "us-east-1"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class EmbeddedS3:
    """A running moto server: ``endpoint_url``, the outcommit ``config`` to reach it, ``stop()``."""

    endpoint_url: str
    server: Any = field(repr=False)
    max_attempts: int = 2

    @property
    def config(self) -> dict[str, str]:
        return {
            "outcommit.s3.endpoint": self.endpoint_url,
            "outcommit.s3.access-key": DUMMY_KEY,
            "outcommit.s3.secret-key": DUMMY_SECRET,
            "outcommit.s3.region": REGION,
            "outcommit.s3.path-style-access": "true",
            # moto answers 500 where S3 says NoSuchUpload: do not retry those for seconds.
            "outcommit.s3.retry.max-attempts": str(self.max_attempts),
        }

    @property
    def hadoop_config(self) -> dict[str, str]:
        """The same settings under Hadoop's names (``spark.hadoop.`` prefix for Spark)."""
        return {
            "spark.hadoop.fs.s3a.endpoint": self.endpoint_url,
            "spark.hadoop.fs.s3a.access.key": DUMMY_KEY,
            "spark.hadoop.fs.s3a.secret.key": DUMMY_SECRET,
            "spark.hadoop.fs.s3a.path.style.access": "true",
        }

    def client(self) -> Any:
        import botocore.session
        from botocore.config import Config

        return botocore.session.get_session().create_client(
            "s3", endpoint_url=self.endpoint_url, region_name=REGION, aws_access_key_id=DUMMY_KEY,
            aws_secret_access_key=DUMMY_SECRET,
            config=Config(retries={"max_attempts": 1}, s3={"addressing_style": "path"}))

    def create_bucket(self, name: str) -> None:
        """Create ``name`` unless it exists already (a shared server, several test modules)."""
        client = self.client()
        try:
            client.create_bucket(Bucket=name)
        except client.exceptions.BucketAlreadyOwnedByYou:
            pass

    def stop(self) -> None:
        self.server.stop()

    def __enter__(self) -> EmbeddedS3:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_moto_server(buckets: Iterable[str] = (), port: int | None = None,
                      max_attempts: int = 2) -> EmbeddedS3:
    """Start moto's S3 server in a thread on 127.0.0.1 and create ``buckets``."""
    try:
        from moto.server import ThreadedMotoServer
    except ImportError as exc:
        raise ImportError(f"the embedded S3 server needs moto: "
                          f"{install_command('outcommit-s3', 'embedded')}") from exc
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    chosen = port or free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=chosen, verbose=False)
    server.start()
    embedded = EmbeddedS3(endpoint_url=f"http://127.0.0.1:{chosen}", server=server,
                          max_attempts=max_attempts)
    for bucket in buckets:
        embedded.create_bucket(bucket)
    return embedded
