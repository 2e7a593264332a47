"""outcommit store for ``gs://`` and ``gcs://`` (Google Cloud Storage through gcsfs)."""

from .store import GCS_CAPABILITIES, GcsStore

__all__ = ["GCS_CAPABILITIES", "GcsStore"]
