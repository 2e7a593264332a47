"""The store contract on the GCS emulator."""

from __future__ import annotations

from typing import Any

import pytest

from outcommit.testing.stores import StoreContract

pytestmark = pytest.mark.gcs


class TestGcsStore(StoreContract):
    @pytest.fixture
    def store_root(self, gcs_root: str) -> str:
        return gcs_root

    @pytest.fixture
    def config(self, gcs_config: dict[str, Any]) -> dict[str, Any]:
        return gcs_config
