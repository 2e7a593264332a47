"""The store contract on the moto S3 server."""

from __future__ import annotations

from typing import Any

import pytest

from generative import budget
from outcommit.testing.stores import StoreContract

pytestmark = pytest.mark.s3


class TestS3Store(StoreContract):
    name_settings = budget(10)

    @pytest.fixture
    def store_root(self, s3_root: str) -> str:
        return s3_root

    @pytest.fixture
    def config(self, s3_config: dict[str, Any]) -> dict[str, Any]:
        return s3_config
