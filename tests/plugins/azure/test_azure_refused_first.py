"""An Azure container name Azure would never serve is refused before any request, in one
line with the fix (issue 29, item 5): it was answered as a container that does not exist."""

from __future__ import annotations

import re
from typing import Any

import pytest

import outcommit
from outcommit import ConfigError

pytestmark = pytest.mark.azure


@pytest.mark.parametrize(("container", "problem"), [
    ("Bad_Container", "uppercase letters and '_' are not allowed"),
    ("ab", "it has 2 characters"),
    ("two--dashes", "it must begin and end with a letter or digit, and have no '--'"),
    ("data.v1", "'.' is not allowed"),
])
def test_a_container_name_azure_would_never_serve_is_refused(azure_config: dict[str, Any], container: str,
                                                             problem: str) -> None:
    name = re.escape(container)
    with pytest.raises(ConfigError, match=rf"abfs://{name}/out: '{name}' is not a valid Azure container "
                                          rf"name: {re.escape(problem)} \(Azure container names are"):
        outcommit.create_committer(f"abfs://{container}/out", azure_config)


def test_valid_and_special_containers_pass(azure_config: dict[str, Any]) -> None:
    for url in ("abfs://data-1/out", "az://$web/site", "abfss://data@account.dfs.core.windows.net/out"):
        outcommit.open_store(url, azure_config)


def test_blocklist_is_refused_on_another_store_declaring_block_lists() -> None:
    """A store of another plugin may declare Azure's capabilities (block lists, exclusive
    create, consistent listing), but blocklist binds Azure (its pendingsets name abfs://
    URIs): it is refused there in one line naming the schemes it is made for, and not
    offered as safe."""
    from outcommit import StoreSpec
    from outcommit.errors import UnsafeCommitterError
    from outcommit.factory import describe_capabilities
    from outcommit.plugins import get_registry, reset_registry
    from outcommit.stores.memory import MemoryStore
    from outcommit_azure.store import BLOB_CAPABILITIES

    class Blocks(MemoryStore):
        capabilities = BLOB_CAPABILITIES

        def strip(self, url: str) -> str:
            return super().strip(url.replace("blockmem://", "memory://", 1))

    class Plugin:
        @outcommit.hookimpl
        def register_stores(self, register) -> None:  # type: ignore[no-untyped-def]
            register.add(StoreSpec(("blockmem",), lambda url, config: Blocks(url, config), "v1",
                                   BLOB_CAPABILITIES))

    reset_registry()
    try:
        get_registry().add_plugin(Plugin(), "blockmem")
        with pytest.raises(UnsafeCommitterError, match=r"committer 'blocklist' is made for abfs://, "
                                                       r"abfss://, az:// only, not blockmem://"):
            outcommit.create_committer("blockmem://container/out", committer="blocklist")
        assert "blocklist" not in describe_capabilities("blockmem://container/out")["safe_committers"]
    finally:
        reset_registry()
