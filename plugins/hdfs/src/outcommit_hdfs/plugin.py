"""Entry point of the ``outcommit-hdfs`` distribution."""

from __future__ import annotations

from outcommit import Config, ConfigKeyRegistrar, StoreRegistrar, StoreSpec, hookimpl

from .store import HDFS_CAPABILITIES, HdfsStore


def _make(url: str, config: Config) -> HdfsStore:
    return HdfsStore(url, config)


@hookimpl
def register_stores(register: StoreRegistrar) -> None:
    register.add(StoreSpec(("hdfs", "viewfs"), _make, "v1", HDFS_CAPABILITIES,
                           "HDFS via pyarrow/libhdfs: atomic rename, v1 by default"))


@hookimpl
def register_config_keys(register: ConfigKeyRegistrar) -> None:
    register.add("outcommit.hdfs.host", "namenode host when the URL has none (default: 'default')")
    register.add("outcommit.hdfs.user", "user to connect as")
