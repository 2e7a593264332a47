"""outcommit store for ``abfs://``, ``abfss://`` and ``az://`` (Azure Storage through adlfs)."""

from .store import BLOB_CAPABILITIES, HNS_CAPABILITIES, AzureStore

__all__ = ["BLOB_CAPABILITIES", "HNS_CAPABILITIES", "AzureStore"]
