"""The shared conformance suite for magic, directory and partitioned on the moto S3 server."""

from __future__ import annotations

from typing import Any

import pytest

from outcommit.testing.conformance import CommitterConformance
from outcommit.testing.faults import Fault

pytestmark = pytest.mark.s3


class S3Binding(CommitterConformance):
    # The third completion happens on the server, then the call fails: a commit failing part-way.
    job_commit_fault = Fault("multipart.complete", when="after", skip=2)
    task_publish_operation = "create_exclusive"

    @pytest.fixture
    def destination_root(self, s3_root: str) -> str:
        return s3_root

    @pytest.fixture
    def config(self, s3_config: dict[str, Any]) -> dict[str, Any]:
        # The suite compares file names: staging's job-id-in-the-name is switched off here.
        return {**s3_config, "outcommit.committer.unique-filenames": "false"}


class TestMagicOnMoto(S3Binding):
    @pytest.fixture
    def committer_name(self) -> str:
        return "magic"


class TestDirectoryOnMoto(S3Binding):
    @pytest.fixture
    def committer_name(self) -> str:
        return "directory"


class TestPartitionedOnMoto(S3Binding):
    @pytest.fixture
    def committer_name(self) -> str:
        return "partitioned"
