"""Entry point of the ``outcommit-hdfs`` distribution."""

from __future__ import annotations

from collections.abc import Callable

from outcommit import Config, StoreSpec, hookimpl

from .store import HDFS_CAPABILITIES, HdfsStore


def _make(url: str, config: Config) -> HdfsStore:
    return HdfsStore(url, config)


@hookimpl
def register_stores(register: Callable[..., None]) -> None:
    register(StoreSpec(("hdfs", "viewfs"), _make, "v1", HDFS_CAPABILITIES,
                       "HDFS via pyarrow/libhdfs: atomic rename, v1 by default"))


@hookimpl
def register_config_keys(register: Callable[[str, str], None]) -> None:
    register("outcommit.hdfs.host", "namenode host when the URL has none (default: 'default')")
    register("outcommit.hdfs.user", "user to connect as")
