"""The store contract on both GCS emulators: the second enforces upload preconditions."""

from __future__ import annotations

from typing import Any

import pytest

from outcommit.testing.stores import StoreContract

pytestmark = pytest.mark.gcs


class TestGcsStore(StoreContract):
    """gcp-storage-emulator: ignores preconditions, so exclusive create is not declared."""

    @pytest.fixture
    def store_root(self, gcs_root: str) -> str:
        return gcs_root

    @pytest.fixture
    def config(self, gcs_config: dict[str, Any]) -> dict[str, Any]:
        return gcs_config


class TestGcsStoreOnFakeGcsServer(StoreContract):
    """fake-gcs-server: exclusive create (ifGenerationMatch=0 on upload) is enforced and tested."""

    @pytest.fixture
    def store_root(self, fake_gcs_root: str) -> str:
        return fake_gcs_root

    @pytest.fixture
    def config(self, fake_gcs_config: dict[str, Any]) -> dict[str, Any]:
        return fake_gcs_config
