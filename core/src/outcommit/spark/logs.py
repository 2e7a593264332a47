"""The Spark engine's logger, shared by the batch writer (``datasource``) and the streaming
sink (``streaming``): neither imports the other for it."""

from __future__ import annotations

import logging
import sys

log = logging.getLogger("outcommit.spark")


def driver_logging() -> None:
    """Make the driver's INFO summary visible: Spark's Python processes configure no logging."""
    if not log.handlers and not logging.getLogger().handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s INFO outcommit: %(message)s", "%H:%M:%S"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        log.propagate = False
