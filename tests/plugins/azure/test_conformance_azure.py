"""The shared conformance suite for the manifest committer on the Azurite."""

from __future__ import annotations

from typing import Any

import pytest

from outcommit.testing.conformance import CommitterConformance
from outcommit.testing.faults import Fault

pytestmark = pytest.mark.azure


def _refused(message: str) -> BaseException:
    return PermissionError(message)  # not transient: fails the job commit part-way


class TestManifestOnAzurite(CommitterConformance):
    job_commit_fault = Fault("rename_file", path_contains="/tasks/", skip=2, error=_refused)
    task_publish_operation = "rename_file"

    @pytest.fixture
    def committer_name(self) -> str:
        return "manifest"

    @pytest.fixture
    def config(self, azure_config: dict[str, Any]) -> dict[str, Any]:
        return azure_config

    @pytest.fixture
    def destination_root(self, azure_root: str) -> str:
        return azure_root
