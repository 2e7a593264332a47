"""The built-in plugin: ``file`` and ``memory`` stores, ``v1`` and ``v2`` committers.

Registered through the same hooks as any installed plugin.
"""

from __future__ import annotations

from .committer import CommitterSpec
from .committers.delayed.memmp import CONFIG_KEYS as MEMMP_MAGIC_KEYS
from .committers.delayed.memmp import MemoryMagicCommitter
from .committers.fileoutput import FileOutputCommitterV1, FileOutputCommitterV2
from .committers.manifest import CONFIG_KEYS as MANIFEST_KEYS
from .committers.manifest import ManifestCommitter
from .config import CORE_ALIASES, CORE_FAMILIES, CORE_KEYS, Config
from .hookspecs import (
    CommitterRegistrar,
    ConfigAliasRegistrar,
    ConfigFamilyRegistrar,
    ConfigKeyRegistrar,
    StoreRegistrar,
    hookimpl,
)
from .progress import CONFIG_KEYS as PROGRESS_KEYS
from .retry import CONFIG_KEYS as RETRY_KEYS
from .store import StoreSpec
from .stores.local import LOCAL_CAPABILITIES, LocalStore
from .stores.memmp import CONFIG_KEYS as MEMMP_KEYS
from .stores.memmp import MEMMP_CAPABILITIES, MemoryMultipartStore
from .stores.memory import MEMORY_CAPABILITIES, MemoryStore


def _local(url: str, config: Config) -> LocalStore:
    return LocalStore(url, config)


def _memory(url: str, config: Config) -> MemoryStore:
    return MemoryStore(url, config)


def _memmp(url: str, config: Config) -> MemoryMultipartStore:
    return MemoryMultipartStore(url, config)


@hookimpl
def register_stores(register: StoreRegistrar) -> None:
    register.add(StoreSpec(("file", "local"), _local, "v1", LOCAL_CAPABILITIES,
                           "local filesystem: atomic file and directory rename"))
    register.add(StoreSpec(("memory",), _memory, "v1", MEMORY_CAPABILITIES,
                           "fsspec in-memory filesystem (one process)"))
    register.add(StoreSpec(("memmp",), _memmp, "memmp-magic", MEMMP_CAPABILITIES,
                           "in-memory files with S3's multipart uploads and no rename (one process)"))


@hookimpl
def register_committers(register: CommitterRegistrar) -> None:
    register.add(CommitterSpec.for_class(FileOutputCommitterV1))
    register.add(CommitterSpec.for_class(FileOutputCommitterV2))
    register.add(CommitterSpec.for_class(ManifestCommitter, config_keys=MANIFEST_KEYS))
    register.add(CommitterSpec.for_class(MemoryMagicCommitter, config_keys=MEMMP_MAGIC_KEYS))


@hookimpl
def register_config_keys(register: ConfigKeyRegistrar) -> None:
    for key, description in {**CORE_KEYS, **RETRY_KEYS, **PROGRESS_KEYS, **MEMMP_KEYS}.items():
        register.add(key, description)


@hookimpl
def register_config_aliases(register: ConfigAliasRegistrar) -> None:
    for alias, key in CORE_ALIASES.items():
        register.add(alias, key)


@hookimpl
def register_config_families(register: ConfigFamilyRegistrar) -> None:
    for family in CORE_FAMILIES:
        register.add(family)
