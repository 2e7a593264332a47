"""Hadoop's manifest committer: the task side and job commit (``committer``), job commit's
stages (``stages``), and the task manifest format (``format``)."""

from .committer import CONFIG_KEYS, ManifestCommitter

__all__ = ["CONFIG_KEYS", "ManifestCommitter"]
