"""The URL schemes the plugin registers its store for, and so the only ones ``blocklist`` is
made for (``Committer.made_for``): another plugin's store may declare block lists, but they
are not Azure's, and blocklist's pendingsets would name ``abfs://`` URIs there."""

from __future__ import annotations

SCHEMES = ("abfs", "abfss", "az")
