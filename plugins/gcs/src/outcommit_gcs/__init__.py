"""outcommit store for ``gs://`` and ``gcs://`` (Google Cloud Storage through gcsfs)."""

from .store import GCS_CAPABILITIES, ExclusiveGcsStore, GcsStore

__all__ = ["GCS_CAPABILITIES", "ExclusiveGcsStore", "GcsStore"]
