"""Fixtures of the S3 tests: one moto server over HTTP per session, a fresh prefix per test."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from outcommit_s3.embedded import EmbeddedS3

BUCKET = "outcommit-test"


@pytest.fixture(scope="session")
def s3_server(moto_server: EmbeddedS3) -> EmbeddedS3:
    moto_server.create_bucket(BUCKET)
    return moto_server


@pytest.fixture
def s3_config(s3_server: EmbeddedS3, tmp_path) -> dict[str, Any]:
    return {**s3_server.config, "outcommit.committer.threads": "4", "outcommit.retry.backoff-ms": "0",
            "outcommit.s3.staging.tmp-dir": str(tmp_path / "staging")}


@pytest.fixture
def s3_root() -> str:
    return f"s3://{BUCKET}/{uuid.uuid4().hex}"
