"""One retry policy for every store request a commit repeats: backoff with full jitter.

Throttling (HTTP 503 SlowDown, 429) comes in bursts shared by every client of a bucket
or account: many clients retrying on the same schedule meet the next burst together,
so each wait is drawn at random up to an exponentially growing cap ("full jitter").
Built on tenacity; committers only say *what* may be retried.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import tenacity

from .config import Config

log = logging.getLogger(__name__)

T = TypeVar("T")

ATTEMPTS_KEY = "outcommit.retry.attempts"
BACKOFF_KEY = "outcommit.retry.backoff-ms"
MAX_BACKOFF_KEY = "outcommit.retry.max-backoff-ms"

CONFIG_KEYS: dict[str, str] = {
    ATTEMPTS_KEY: "attempts per commit request on throttling or transient failures, beyond the "
                  "store client's own retries (default 8)",
    BACKOFF_KEY: "first retry delay cap in ms, doubled per retry, each wait drawn at random "
                 "below it (default 200)",
    MAX_BACKOFF_KEY: "largest retry delay cap in ms (default 20000)",
}


class RetryLater(Exception):
    """Raised inside a retried action: it provably did not take effect and may succeed later.

    For requests whose failure needs evidence before a retry (was the rename, the upload
    completion, done after all?): the action decides, and ``cause`` is the real error.
    """

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently a committer repeats a request that may succeed later."""

    attempts: int = 8
    backoff: float = 0.2       # seconds: the cap of the first wait
    max_backoff: float = 20.0  # seconds

    @classmethod
    def from_config(cls, config: Config, attempts_key: str = ATTEMPTS_KEY,
                    backoff_key: str = BACKOFF_KEY) -> RetryPolicy:
        """The policy of ``config``; ``attempts_key``/``backoff_key`` name a committer's own
        keys, which win over the general ``outcommit.retry.*`` ones."""
        default = cls()
        attempts = config.get_int(ATTEMPTS_KEY, default.attempts, minimum=1)
        backoff_ms = config.get_int(BACKOFF_KEY, int(default.backoff * 1000), minimum=0)
        if attempts_key != ATTEMPTS_KEY:
            attempts = config.get_int(attempts_key, attempts, minimum=1)
        if backoff_key != BACKOFF_KEY:
            backoff_ms = config.get_int(backoff_key, backoff_ms, minimum=0)
        max_ms = config.get_int(MAX_BACKOFF_KEY, int(default.max_backoff * 1000), minimum=0)
        return cls(attempts, backoff_ms / 1000.0, max(max_ms, backoff_ms) / 1000.0)

    def call(self, action: Callable[[], T], *, retry_if: Callable[[BaseException], bool],
             what: str = "", on_retry: Callable[[BaseException], None] | None = None) -> T:
        """``action()``, repeated while it raises an error ``retry_if`` accepts.

        The last error is raised as it is once the attempts are spent, or at once when
        ``retry_if`` refuses it: the caller's error names the real cause.

        The first attempt runs without tenacity: most calls succeed at once, and building
        the retrying machinery for each cost job commit ~0.03 ms per file (issue 30). A
        first failure ``retry_if`` accepts is handed to tenacity as its first attempt's
        outcome (not run again), so waits, logging and the attempt count are unchanged.
        """
        try:
            return action()
        except BaseException as error:  # as tenacity's own attempts catch
            if not retry_if(error) or self.attempts <= 1:
                raise
            first = error
        return self._retried(action, first, retry_if, what, on_retry)

    def _retried(self, action: Callable[[], T], first: BaseException,
                 retry_if: Callable[[BaseException], bool], what: str,
                 on_retry: Callable[[BaseException], None] | None) -> T:
        """Attempts 2.. through tenacity, its attempt 1 being ``first``, already failed
        and accepted by ``retry_if`` (which is asked once per failure: callers count
        throttling in it)."""
        replayed: list[BaseException] = [first]

        def attempt() -> T:
            if replayed:
                raise replayed[0]  # attempt 1's outcome, without running the action again
            return action()

        def retry(error: BaseException) -> bool:
            if replayed and error is replayed[0]:
                replayed.clear()
                return True  # retry_if said so already
            return retry_if(error)

        def before_sleep(state: tenacity.RetryCallState) -> None:
            error = state.outcome.exception() if state.outcome else None
            if error is not None:
                if on_retry is not None:
                    on_retry(error)
                log.info("%s failed (attempt %d of %d: %s); retrying", what or "request",
                         state.attempt_number, self.attempts, error)

        wait = (tenacity.wait_random_exponential(multiplier=self.backoff, max=self.max_backoff)
                if self.backoff > 0 else tenacity.wait_none())
        retrying = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(self.attempts), wait=wait,
            retry=tenacity.retry_if_exception(retry), before_sleep=before_sleep, reraise=True)
        return retrying(attempt)
