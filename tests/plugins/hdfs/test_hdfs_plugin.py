"""The HDFS plugin: registration and selection without a cluster; a real cluster when configured.

The v1/v2 committers it selects are proven by the conformance suite on the local
filesystem, which has HDFS's guarantees (atomic file and directory rename, consistent
listing). Set OUTCOMMIT_TEST_HDFS_URL=hdfs://namenode:8020/tmp/outcommit-tests to run the
conformance suite against a real cluster.
"""

from __future__ import annotations

import os
import uuid

import pytest

import outcommit
from outcommit import capabilities as caps
from outcommit.plugins import get_registry
from outcommit.testing.conformance import CommitterConformance
from outcommit.testing.stores import StoreContract
from outcommit_hdfs import HDFS_CAPABILITIES, HdfsStore

HDFS_URL = os.environ.get("OUTCOMMIT_TEST_HDFS_URL")


def test_plugin_registers_hdfs_and_viewfs_with_v1_default() -> None:
    stores = get_registry().stores()
    for scheme in ("hdfs", "viewfs"):
        assert stores[scheme].plugin == "hdfs" and stores[scheme].default_committer == "v1"
    committer = outcommit.create_committer("hdfs://namenode:8020/warehouse/t")
    assert committer.name == "v1" and committer.dest == "/warehouse/t"
    assert committer.store.url("/warehouse/t/x") == "hdfs://namenode:8020/warehouse/t/x"
    assert committer.store._fs is None, "choosing a committer must not connect to the cluster"


def test_capabilities_match_the_local_filesystem() -> None:
    local = outcommit.open_store("file:///tmp").capabilities
    assert HdfsStore.capabilities == HDFS_CAPABILITIES
    assert HDFS_CAPABILITIES.names == local.names
    assert HDFS_CAPABILITIES.has_capability(caps.RENAME_DIRECTORY_ATOMIC)
    assert not HDFS_CAPABILITIES.has_capability(caps.MULTIPART_DELAYED_COMPLETION)
    assert outcommit.create_committer("viewfs://cluster/t", committer="v2").name == "v2"


@pytest.mark.skipif(not HDFS_URL, reason="no HDFS cluster here: set OUTCOMMIT_TEST_HDFS_URL to run")
class TestV1OnRealHdfs(CommitterConformance):
    @pytest.fixture
    def committer_name(self) -> str:
        return "v1"

    @pytest.fixture
    def destination_root(self) -> str:
        return f"{HDFS_URL.rstrip('/')}/{uuid.uuid4().hex}"


@pytest.mark.skipif(not HDFS_URL, reason="no HDFS cluster here: set OUTCOMMIT_TEST_HDFS_URL to run")
class TestStoreContractOnRealHdfs(StoreContract):
    @pytest.fixture
    def store_root(self) -> str:
        return f"{HDFS_URL.rstrip('/')}/{uuid.uuid4().hex}"
