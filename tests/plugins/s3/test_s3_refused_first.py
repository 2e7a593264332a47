"""Mistakes in an S3 destination or endpoint are refused before any request, in one line
with the fix (issue 29, item 5): an endpoint without a scheme failed after 9-12 s of TLS
retries against a plain-HTTP server; ``Bad_Bucket`` was reported as a bucket that does not
exist (create it: S3 would refuse to)."""

from __future__ import annotations

import re
from typing import Any

import pytest

import outcommit
from outcommit import ConfigError

pytestmark = pytest.mark.s3


@pytest.mark.parametrize(("bucket", "problem"), [
    ("Bad_Bucket", "uppercase letters and '_' are not allowed"),
    ("ab", "it has 2 characters"),
    ("-bucket", "it must begin and end with a letter or digit"),
    ("a..b", "it has two adjacent dots"),
    ("10.0.0.1", "it is formatted as an IP address"),
])
def test_a_bucket_name_s3_would_never_serve_is_refused_before_any_request(
        s3_config: dict[str, Any], bucket: str, problem: str) -> None:
    name = re.escape(bucket)
    with pytest.raises(ConfigError, match=rf"s3://{name}/out: '{name}' is not a valid S3 bucket name: "
                                          rf"{problem} \(S3 bucket names are 3-63 characters"):
        outcommit.create_committer(f"s3://{bucket}/out", s3_config)


def test_valid_names_of_every_kind_of_bucket_pass(s3_config: dict[str, Any]) -> None:
    for bucket in ("my.bucket-1", "base--usw2-az1--x-s3", "ap-name-abc123-s3alias"):
        assert outcommit.open_store(f"s3://{bucket}/out", s3_config).strip(f"s3://{bucket}/out") \
            == f"{bucket}/out"


def test_an_endpoint_without_a_scheme_is_refused_at_once(s3_server: Any, s3_config: dict[str, Any],
                                                          s3_root: str) -> None:
    hostport = s3_server.endpoint_url.removeprefix("http://")
    config = {k: v for k, v in s3_config.items() if "endpoint" not in k}
    with pytest.raises(ConfigError, match=rf"^spark.hadoop.fs.s3a.endpoint='{hostport}' has no scheme: "
                                          rf"add http:// or https:// \(http://{hostport} for a"):
        outcommit.open_store(s3_root, {**config, "spark.hadoop.fs.s3a.endpoint": hostport})
    # Hadoop's rule where asked for: fs.s3a.connection.ssl.enabled=false makes it http://.
    store = outcommit.open_store(s3_root, {**config, "fs.s3a.endpoint": hostport,
                                           "fs.s3a.connection.ssl.enabled": "false"})
    store.write_bytes(store.join(store.strip(s3_root), "a.txt"), b"a")
    assert store.read_bytes(store.join(store.strip(s3_root), "a.txt")) == b"a"
