"""The shared conformance suite for the blocklist committer on Azurite (a Blob account)."""

from __future__ import annotations

from typing import Any

import pytest

from outcommit.testing.conformance import CommitterConformance
from outcommit.testing.faults import Fault

pytestmark = pytest.mark.azure


class TestBlockListOnAzurite(CommitterConformance):
    # The third Put Block List happens on the server, then the call fails: part-way.
    job_commit_fault = Fault("blocklist.complete", when="after", skip=2)
    task_publish_operation = "create_exclusive"

    @pytest.fixture
    def committer_name(self) -> str:
        return "blocklist"

    @pytest.fixture
    def config(self, azure_config: dict[str, Any]) -> dict[str, Any]:
        return azure_config

    @pytest.fixture
    def destination_root(self, azure_root: str) -> str:
        return azure_root
