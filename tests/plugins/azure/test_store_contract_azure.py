"""The store contract on Azurite (a Blob account)."""

from __future__ import annotations

from typing import Any

import pytest

from generative import budget
from outcommit.testing.stores import StoreContract

pytestmark = pytest.mark.azure


class TestAzureBlobStore(StoreContract):
    name_settings = budget(10)

    @pytest.fixture
    def store_root(self, azure_root: str) -> str:
        return azure_root

    @pytest.fixture
    def config(self, azure_config: dict[str, Any]) -> dict[str, Any]:
        return azure_config
