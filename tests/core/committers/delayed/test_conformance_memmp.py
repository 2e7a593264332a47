"""The shared conformance suite for the delayed-completion family on ``memmp://``."""

from __future__ import annotations

from typing import Any

import pytest

from outcommit.testing.conformance import CommitterConformance
from outcommit.testing.faults import Fault


class TestMemmpMagic(CommitterConformance):
    # The third completion happens, then the call fails: a job commit failing part-way.
    job_commit_fault = Fault("multipart.complete", when="after", skip=2)
    task_publish_operation = "create_exclusive"

    @pytest.fixture
    def committer_name(self) -> str:
        return "memmp-magic"

    @pytest.fixture
    def destination_root(self, memmp_root: str) -> str:
        return memmp_root

    @pytest.fixture
    def config(self, small_parts: dict[str, Any]) -> dict[str, Any]:
        return small_parts
