"""The store contract on both GCS emulators: the second enforces upload preconditions."""

from __future__ import annotations

from typing import Any

import pytest

from generative import budget
from outcommit.testing.stores import StoreContract

pytestmark = pytest.mark.gcs


class TestGcsStore(StoreContract):
    """gcp-storage-emulator: ignores preconditions, so exclusive create is not declared."""

    name_settings = budget(10)
    # The emulator stores 'a\\b' as 'a/b' (gcp_storage_emulator/storage.py) and answers 404
    # to a download of a name holding ';'; GCS keeps both, and so does fake-gcs-server (its
    # binding below tries them).
    server_mishandles = "\\;"

    @pytest.fixture
    def store_root(self, gcs_root: str) -> str:
        return gcs_root

    @pytest.fixture
    def config(self, gcs_config: dict[str, Any]) -> dict[str, Any]:
        return gcs_config


class TestGcsStoreOnFakeGcsServer(StoreContract):
    """fake-gcs-server: exclusive create (ifGenerationMatch=0 on upload) is enforced and tested."""

    name_settings = budget(10)

    @pytest.fixture
    def store_root(self, fake_gcs_root: str) -> str:
        return fake_gcs_root

    @pytest.fixture
    def config(self, fake_gcs_config: dict[str, Any]) -> dict[str, Any]:
        return fake_gcs_config
