"""The shared conformance suite for the manifest committer on the GCS emulator."""

from __future__ import annotations

from typing import Any

import pytest

from outcommit.testing.conformance import CommitterConformance
from outcommit.testing.faults import Fault

pytestmark = pytest.mark.gcs


def _refused(message: str) -> BaseException:
    return PermissionError(message)  # not transient: fails the job commit part-way


class TestManifestOnGcsEmulator(CommitterConformance):
    job_commit_fault = Fault("rename_file", path_contains="/tasks/", skip=2, error=_refused)
    task_publish_operation = "rename_file"

    @pytest.fixture
    def committer_name(self) -> str:
        return "manifest"

    @pytest.fixture
    def config(self, gcs_config: dict[str, Any]) -> dict[str, Any]:
        return gcs_config

    @pytest.fixture
    def destination_root(self, gcs_root: str) -> str:
        return gcs_root


class TestManifestOnFakeGcsServer(TestManifestOnGcsEmulator):
    """The same on fake-gcs-server: manifests published with a server-enforced exclusive create."""

    @pytest.fixture
    def config(self, fake_gcs_config: dict[str, Any]) -> dict[str, Any]:
        return fake_gcs_config

    @pytest.fixture
    def destination_root(self, fake_gcs_root: str) -> str:
        return fake_gcs_root
