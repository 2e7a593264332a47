"""Registers ``tstore://``: memory-backed, without atomic directory rename (so v1 is unsafe)."""

from outcommit import capabilities as caps
from outcommit import hookimpl
from outcommit.capabilities import Capabilities
from outcommit.store import StoreSpec
from outcommit.stores.memory import MemoryStore

TSTORE_CAPABILITIES = Capabilities.of(caps.RENAME_FILE_ATOMIC, caps.LISTING_CONSISTENT)


class TStore(MemoryStore):
    capabilities = TSTORE_CAPABILITIES
    default_committer = "v2"

    def make_filesystem(self):
        import fsspec

        return fsspec.filesystem("memory")

    def strip(self, url):
        return "/tstore/" + url.split("://", 1)[1].strip("/")

    def url(self, path):
        return "tstore://" + path[len("/tstore/"):]


@hookimpl
def register_stores(register):
    register.add(StoreSpec(("tstore",), lambda url, config: TStore(url, config), "v2",
                           TSTORE_CAPABILITIES, "test store"))


@hookimpl
def register_config_keys(register):
    register.add("outcommit.tstore.", "test store options")
