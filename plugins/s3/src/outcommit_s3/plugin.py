"""Entry point of the ``outcommit-s3`` distribution."""

from __future__ import annotations

from outcommit import (
    CommitterRegistrar,
    CommitterSelector,
    CommitterSpec,
    Config,
    ConfigAliasRegistrar,
    ConfigFamilyRegistrar,
    ConfigKeyRegistrar,
    SelectorRegistrar,
    StoreRegistrar,
    StoreSpec,
    hookimpl,
)

from . import hadoop, settings
from .store import S3_CAPABILITIES


def _make_store(url: str, config: Config):  # type: ignore[no-untyped-def]
    from .store import S3Store

    return S3Store(url, config)


@hookimpl
def register_stores(register: StoreRegistrar) -> None:
    register.add(StoreSpec(settings.SCHEMES, _make_store, "magic", S3_CAPABILITIES,
                           "Amazon S3 and compatibles (s3fs + botocore): multipart uploads, no rename"))


@hookimpl
def register_committers(register: CommitterRegistrar) -> None:
    from .magic.committer import MagicCommitter
    from .staging.committer import DirectoryStagingCommitter, PartitionedStagingCommitter

    for committer in (MagicCommitter, DirectoryStagingCommitter, PartitionedStagingCommitter):
        register.add(CommitterSpec.for_class(committer))


@hookimpl
def register_config_keys(register: ConfigKeyRegistrar) -> None:
    for key, description in settings.KEYS.items():
        register.add(key, description, secret=key in settings.SECRET_KEYS)


@hookimpl
def register_config_aliases(register: ConfigAliasRegistrar) -> None:
    for key, alias in settings.HADOOP_ALIASES.items():
        register.add(alias, key)


@hookimpl
def register_config_families(register: ConfigFamilyRegistrar) -> None:
    for family in hadoop.FAMILIES:
        register.add(family)


@hookimpl
def register_committer_selectors(register: SelectorRegistrar) -> None:
    # Hadoop's committer choice for s3a://; 'file' is the FileOutputCommitter (refused on S3
    # unless allowed: no atomic rename).
    register.add(CommitterSelector(
        key=settings.S3A_COMMITTER_NAME, schemes=settings.SCHEMES, label="fs.s3a.committer.name",
        choices={"file": None, "directory": "directory", "partitioned": "partitioned",
                 "magic": "magic"}))
