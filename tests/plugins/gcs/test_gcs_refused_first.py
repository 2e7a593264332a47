"""A GCS bucket name GCS would never serve, or an endpoint without a scheme, is refused
before any request, in one line with the fix (issue 29, item 5)."""

from __future__ import annotations

import re
from typing import Any

import pytest

import outcommit
from outcommit import ConfigError

pytestmark = pytest.mark.gcs


@pytest.mark.parametrize(("bucket", "problem"), [
    ("Bad_Bucket", "uppercase letters are not allowed"),
    ("a b", "' ' is not allowed"),
    ("ab", "it has 2 characters"),
    ("_bucket", "it must begin and end with a letter or digit"),
    ("my-google-data", "names beginning with 'goog' or containing 'google' are reserved"),
])
def test_a_bucket_name_gcs_would_never_serve_is_refused(gcs_config: dict[str, Any], bucket: str,
                                                        problem: str) -> None:
    name = re.escape(bucket)
    with pytest.raises(ConfigError, match=rf"gs://{name}/out: '{name}' is not a valid GCS bucket name: "
                                          rf"{re.escape(problem)} \(GCS bucket names are"):
        outcommit.create_committer(f"gs://{bucket}/out", gcs_config)


def test_underscores_and_dotted_names_pass(gcs_config: dict[str, Any]) -> None:
    for bucket in ("my_bucket", "data.example.com"):
        outcommit.open_store(f"gs://{bucket}/out", gcs_config)


def test_an_endpoint_without_a_scheme_is_refused_at_once(gcs_emulator: Any, gcs_config: dict[str, Any],
                                                          gcs_root: str) -> None:
    hostport = gcs_config["outcommit.gcs.endpoint"].split("://", 1)[1]
    with pytest.raises(ConfigError, match=rf"^outcommit.gcs.endpoint='{re.escape(hostport)}' has no "
                                          rf"scheme: add http:// or https://"):
        outcommit.open_store(gcs_root, {**gcs_config, "outcommit.gcs.endpoint": hostport})
