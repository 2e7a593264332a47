"""The store contract on HdfsStore's own code without a cluster: its filesystem is fsspec's
``ArrowFSWrapper`` (the class of fsspec's ``hdfs`` filesystem) over pyarrow's local
filesystem, so its renames and deletes go through the same wrapper they use on HDFS."""

from __future__ import annotations

from pathlib import Path

import pytest
from fsspec.implementations.arrow import ArrowFSWrapper
from pyarrow.fs import LocalFileSystem

from generative import budget
from outcommit import capabilities as caps
from outcommit.config import Config
from outcommit.errors import UnsupportedNameError
from outcommit.store import Store
from outcommit.testing.stores import StoreContract
from outcommit_hdfs import HDFS_CAPABILITIES, HdfsStore


class ArrowLocalHdfsStore(HdfsStore):
    """HdfsStore on pyarrow's local filesystem. Exclusive create is left out: it opens mode
    'xb', which the wrapper refuses (see the xfail test below)."""

    capabilities = HDFS_CAPABILITIES.without(caps.CREATE_EXCLUSIVE)


class TestHdfsStoreOnArrowLocal(StoreContract):
    name_settings = budget(25)

    @pytest.fixture
    def store_root(self, tmp_path: Path) -> str:
        return f"hdfs://namenode:8020{tmp_path}/root"

    @pytest.fixture
    def store(self, store_root: str) -> Store:
        return ArrowLocalHdfsStore(store_root, Config(), fs=ArrowFSWrapper(LocalFileSystem()))

    def test_listing_is_consistent(self, store: Store, root: str) -> None:
        pytest.skip("a second client would connect to a cluster")

    def test_delete_empty_dir_never_removes_contents(self, store: Store, root: str) -> None:
        pytest.skip("pyarrow deletes no directory only if empty: HdfsStore keeps shared "
                    "directories (delete_empty_dir does nothing, as on object stores)")


def test_a_name_hdfs_refuses_is_refused_before_a_request(tmp_path: Path) -> None:
    store = ArrowLocalHdfsStore(f"hdfs://namenode:8020{tmp_path}", Config(),
                                fs=ArrowFSWrapper(LocalFileSystem()))
    with pytest.raises(UnsupportedNameError, match="HDFS refuses ':'"):
        store.write_bytes(f"{tmp_path}/a:b", b"x")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.xfail(strict=True, raises=ValueError,
                   reason="HdfsStore.create_exclusive opens mode 'xb', which fsspec's arrow "
                          "wrapper (its hdfs filesystem) refuses; libhdfs has no O_EXCL")
def test_create_exclusive_through_the_arrow_wrapper(tmp_path: Path) -> None:
    store = HdfsStore(f"hdfs://namenode:8020{tmp_path}", Config(), fs=ArrowFSWrapper(LocalFileSystem()))
    store.create_exclusive(f"{tmp_path}/claim", b"first")
