"""Interleave drivers deterministically: a call runs in its own thread and stops at a step.

A :class:`Driver` runs one call (a batch commit, say) and, at each ``on_step(step,
batch_id)`` it is told to stop at, hands control back to the test and waits to be
resumed: only one thread runs at any time, so the interleaving is the test's, never the
scheduler's, and nothing waits on a clock. Resumed with ``kill=True``, the call dies
where it stopped (:class:`Killed`, a ``BaseException``: no ``except Exception`` runs),
as a driver SIGKILLed there.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Collection
from typing import Any

#: A deadlock guard, not a synchronisation: the other side answers at once or never.
HANDOFF_TIMEOUT_S = 120.0


class Killed(BaseException):
    """The driver was killed where it stopped: nothing after it runs."""


class Driver:
    """One call, run step by step from the test (see the module docstring)."""

    def __init__(self, name: str, stops: Collection[tuple[str, int]] = ()) -> None:
        self.name = name
        self.stops = set(stops)
        self.stopped_at: tuple[str, int] | None = None
        self.result: Any = None
        self.error: BaseException | None = None
        self.done = False
        self._to_test: queue.Queue[str] = queue.Queue()
        self._to_driver: queue.Queue[bool] = queue.Queue()
        self._thread: threading.Thread | None = None

    def on_step(self, step: str, batch_id: int) -> None:
        """The sink's step hook: stop here if told to, and die here if killed meanwhile."""
        if (step, batch_id) not in self.stops or self._thread is not threading.current_thread():
            return
        self.stopped_at = (step, batch_id)
        self._to_test.put("stopped")
        kill = self._to_driver.get(timeout=HANDOFF_TIMEOUT_S)
        self.stopped_at = None
        if kill:
            raise Killed(f"{self.name} killed at {step} of batch {batch_id}")

    def start(self, call: Callable[[], Any]) -> Driver:
        """Run ``call`` until it stops at a step or returns (or raises)."""
        def body() -> None:
            try:
                self.result = call()
            except BaseException as exc:  # handed to the test, which asserts on it
                self.error = exc
            finally:
                self.done = True
                self._to_test.put("done")

        self._thread = threading.Thread(target=body, name=f"driver-{self.name}", daemon=True)
        self._thread.start()
        self._wait()
        return self

    def resume(self, kill: bool = False) -> Driver:
        """Let the stopped call go on until its next stop or its end (``kill``: die here)."""
        if self.done:
            raise AssertionError(f"{self.name} has finished: nothing to resume")
        self._to_driver.put(kill)
        self._wait()
        return self

    def finish(self) -> Any:
        """Resume until the call ends; its result, or its exception raised here."""
        while not self.done:
            self.resume()
        if self.error is not None:
            raise self.error
        return self.result

    def _wait(self) -> None:
        self._to_test.get(timeout=HANDOFF_TIMEOUT_S)
        if self.done and self._thread is not None:
            self._thread.join(timeout=HANDOFF_TIMEOUT_S)

    @property
    def stopped(self) -> bool:
        return not self.done
