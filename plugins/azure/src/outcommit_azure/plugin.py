"""Entry point of the ``outcommit-azure`` distribution."""

from __future__ import annotations

from outcommit import (
    CommitterRegistrar,
    CommitterSpec,
    Config,
    ConfigKeyRegistrar,
    StoreRegistrar,
    StoreSpec,
    hookimpl,
)

from .schemes import SCHEMES
from .store import BLOB_CAPABILITIES, CONFIG_KEYS, SECRET_KEYS, AzureStore


def _make(url: str, config: Config) -> AzureStore:
    return AzureStore(url, config)


@hookimpl
def register_stores(register: StoreRegistrar) -> None:
    # The declared set is the Blob account's (the weaker one); an instance measures its
    # account and adds atomic directory rename and etag-preserving rename under HNS, where
    # its default committer becomes manifest.
    register.add(StoreSpec(SCHEMES, _make, "blocklist", BLOB_CAPABILITIES,
                           "Azure Storage via adlfs: Blob accounts (block lists committed at job "
                           "commit; blocklist by default) and hierarchical-namespace accounts "
                           "(atomic rename; manifest by default)"))


@hookimpl
def register_committers(register: CommitterRegistrar) -> None:
    from .committer import BlockListCommitter

    register.add(CommitterSpec.for_class(BlockListCommitter))


@hookimpl
def register_config_keys(register: ConfigKeyRegistrar) -> None:
    from .committer import CONFIG_KEYS as COMMITTER_KEYS

    for key, description in {**CONFIG_KEYS, **COMMITTER_KEYS}.items():
        register.add(key, description, secret=key in SECRET_KEYS)
