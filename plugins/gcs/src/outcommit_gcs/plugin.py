"""Entry point of the ``outcommit-gcs`` distribution."""

from __future__ import annotations

from outcommit import Config, ConfigKeyRegistrar, StoreRegistrar, StoreSpec, hookimpl

from .store import CONFIG_KEYS, GCS_CAPABILITIES, TOKEN_KEY, GcsStore, gcs_store


def _make(url: str, config: Config) -> GcsStore:
    return gcs_store(url, config)


@hookimpl
def register_stores(register: StoreRegistrar) -> None:
    register.add(StoreSpec(("gs", "gcs"), _make, "manifest", GCS_CAPABILITIES,
                           "Google Cloud Storage via gcsfs: atomic object create, no directory "
                           "rename; manifest committer by default"))


@hookimpl
def register_config_keys(register: ConfigKeyRegistrar) -> None:
    for key, description in CONFIG_KEYS.items():
        register.add(key, description, secret=key == TOKEN_KEY)  # a service account's JSON, at times
