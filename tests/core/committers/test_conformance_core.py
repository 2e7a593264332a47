"""The shared conformance suite for the rename committers on the built-in stores."""

from __future__ import annotations

import uuid

import pytest

from outcommit.testing.conformance import CommitterConformance
from outcommit.testing.faults import Fault


@pytest.fixture
def file_root(tmp_path) -> str:
    return f"file://{tmp_path}/root"


@pytest.fixture
def memory_root():
    from fsspec.implementations.memory import MemoryFileSystem

    root = f"/conformance-{uuid.uuid4().hex}"
    yield f"memory://{root}"
    MemoryFileSystem().rm(root, recursive=True) if MemoryFileSystem().exists(root) else None


class V1Binding(CommitterConformance):
    task_publish_operation = "rename_dir"
    @pytest.fixture
    def committer_name(self) -> str:
        return "v1"


class V2Binding(CommitterConformance):
    # v2's job commit only writes _SUCCESS: fail that write.
    job_commit_fault = Fault("save_json", path_contains="_SUCCESS")

    @pytest.fixture
    def committer_name(self) -> str:
        return "v2"


class OnFile:
    @pytest.fixture
    def destination_root(self, file_root: str) -> str:
        return file_root


class OnMemory:
    @pytest.fixture
    def destination_root(self, memory_root: str) -> str:
        return memory_root


class TestV1OnFile(OnFile, V1Binding):
    pass


class TestV1OnMemory(OnMemory, V1Binding):
    pass


class TestV2OnFile(OnFile, V2Binding):
    pass


class TestV2OnMemory(OnMemory, V2Binding):
    pass
