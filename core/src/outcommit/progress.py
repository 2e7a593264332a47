"""Progress of long job-commit stages: files done of total, rate and ETA.

Always through logging, at a steady cadence (``outcommit.progress.interval-seconds``,
default 10): a driver's log shows a 100k-file commit moving, not one line at the end.
Interactive tools (the CLI, the demo) also turn on a live bar, drawn by tqdm.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from .config import Config

INTERVAL_KEY = "outcommit.progress.interval-seconds"
BAR_KEY = "outcommit.progress.bar"
CONFIG_KEYS = {INTERVAL_KEY: "log job-commit progress (files done/total, rate, ETA) at most this "
                             "often, in seconds (default 10; 0: never)",
               BAR_KEY: "also draw a live progress bar (tqdm, on stderr) for job commits "
                        "(default false; the CLI and the demo turn it on on a terminal)"}

_bars_on = False


def show_bars(enabled: bool = True) -> None:
    """Draw live progress bars (tqdm, on stderr) for job commits in this process."""
    global _bars_on
    _bars_on = enabled


class Progress:
    """One stage's progress; thread-safe ``advance``; ``close`` logs the final line."""

    def __init__(self, what: str, total: int, log: logging.Logger | logging.LoggerAdapter,  # type: ignore[type-arg]
                 config: Config | None = None, unit: str = "file") -> None:
        self.what = what
        self.unit = unit
        self.total = total
        self.log = log
        config = config or Config()
        self.interval = config.get_int(INTERVAL_KEY, 10, minimum=0)
        self.done = 0
        self.started = self._last = time.monotonic()
        self._lock = threading.Lock()
        self._bar: Any = None
        if (_bars_on or config.get_bool(BAR_KEY, False)) and total > 0:
            from tqdm import tqdm

            self._bar = tqdm(total=total, desc=what, unit=unit, leave=False, dynamic_ncols=True)

    def advance(self, count: int = 1) -> None:
        with self._lock:
            self.done += count
            now = time.monotonic()
            due = self.interval and now - self._last >= self.interval
            if due:
                self._last = now
            if self._bar is not None:
                self._bar.update(count)
        if due:
            self.log.info("%s", self.line(now))

    def line(self, now: float | None = None) -> str:
        elapsed = max((now or time.monotonic()) - self.started, 1e-9)
        rate = self.done / elapsed
        eta = (self.total - self.done) / rate if rate > 0 else float("inf")
        eta_text = f"{eta:.0f} s" if eta != float("inf") else "?"
        return (f"{self.what}: {self.done}/{self.total} {self.unit}s "
                f"({100 * self.done / max(self.total, 1):.0f}%), {rate:.0f} {self.unit}s/s, ETA {eta_text}")

    def close(self) -> None:
        """The stage's last line: at INFO when the stage ran an interval or more (its
        progress was due: the reader sees it end), else at DEBUG: a short stage is no step
        of its own (the job commit's line counts it)."""
        if self._bar is not None:
            self._bar.close()
        if self.total:
            elapsed = time.monotonic() - self.started
            self.log.log(logging.INFO if elapsed >= self.interval else logging.DEBUG,
                         "%s: %d %ss in %.1f s", self.what, self.done, self.unit, elapsed)
