"""The Spark engine's logger, shared by the batch writer (``datasource``), the reader
(``reader``) and the streaming sink (``streaming``): none imports another for it; and how
outcommit's own errors reach the Spark user (:func:`reported_to_spark`)."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from ..errors import OutcommitError

log = logging.getLogger("outcommit.spark")

#: Carriage return, then erase to the end of the line.
CLEAR_LINE = "\r\x1b[K"


class _ConsoleFormatter(logging.Formatter):
    """Spark's console progress bar is drawn as ``\\r[Stage 3:=>  (1 + 2) / 4]\\r``: it leaves
    the cursor at the start of its line, so a line written then overwrote the bar and ran
    into what was left of it. On a terminal each line clears that line first; the bar is
    drawn again below on its next update. (The driver-side steps of a Python data source run
    in processes whose stderr Spark copies to its own: no terminal to ask, hence ``TERM``.)"""

    def format(self, record: logging.LogRecord) -> str:
        return CLEAR_LINE + super().format(record)


def console_formatter(environ: dict[str, str] | None = None) -> logging.Formatter:
    """The driver's console format: one line per step; clearing the line on a terminal."""
    term = (os.environ if environ is None else environ).get("TERM", "")
    kind = _ConsoleFormatter if term and term != "dumb" else logging.Formatter
    return kind("%(asctime)s INFO outcommit: %(message)s", "%H:%M:%S")


def driver_logging() -> None:
    """Make the driver's INFO summary visible: Spark's Python processes configure no logging."""
    if not log.handlers and not logging.getLogger().handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(console_formatter())
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        log.propagate = False


@contextmanager
def reported_to_spark(step: str) -> Iterator[None]:
    """Make an :class:`OutcommitError` the first line of the error the Spark user sees.

    PySpark sends a Python process's exception to the JVM as a formatted traceback (its
    first line "Traceback (most recent call last):", the message last) unless
    ``SPARK_HIDE_TRACEBACK`` is set in that process, and the process exits right after
    reporting (``pyspark.sql.worker.utils.worker_run``, ``pyspark.worker.main``). Setting
    it just before our own errors leave makes Spark's message read
    ``... outcommit.errors.OptionError: unknown write option 'partitonby' ...`` and
    changes nothing for any other error or any later work. The traceback goes to the log.
    """
    try:
        yield
    except OutcommitError as error:
        log.debug("%s failed: %s", step, error, exc_info=True)
        os.environ["SPARK_HIDE_TRACEBACK"] = "1"
        raise
