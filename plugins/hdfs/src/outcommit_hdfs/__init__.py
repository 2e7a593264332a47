"""outcommit store for ``hdfs://`` and ``viewfs://``."""

from .store import HDFS_CAPABILITIES, HdfsStore

__all__ = ["HDFS_CAPABILITIES", "HdfsStore"]
