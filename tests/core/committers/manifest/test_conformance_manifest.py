"""The shared conformance suite for the manifest committer on the built-in stores."""

from __future__ import annotations

from typing import Any

import pytest

from outcommit.testing.conformance import CommitterConformance
from outcommit.testing.faults import Fault

# No real backoff in tests: retries are counted, never waited for.
FAST_RETRIES = {"outcommit.manifest.retry-backoff-ms": "0"}


def _refused(message: str) -> BaseException:
    # Not transient: the committer must fail the job rather than retry it away.
    return PermissionError(message)


# The third rename is refused outright: job commit fails part-way, two files already moved.
MANIFEST_JOB_COMMIT_FAULT = Fault("rename_file", path_contains="/tasks/", skip=2, error=_refused)


class ManifestBinding(CommitterConformance):
    """The manifest committer's fixtures; subclasses choose the store."""

    job_commit_fault = MANIFEST_JOB_COMMIT_FAULT
    task_publish_operation = "rename_file"

    @pytest.fixture
    def committer_name(self) -> str:
        return "manifest"

    @pytest.fixture
    def config(self) -> dict[str, Any]:
        return dict(FAST_RETRIES)


class TestManifestOnFile(ManifestBinding):
    @pytest.fixture
    def destination_root(self, file_root: str) -> str:
        return file_root


class TestManifestOnMemory(ManifestBinding):
    @pytest.fixture
    def destination_root(self, memory_root: str) -> str:
        return memory_root
