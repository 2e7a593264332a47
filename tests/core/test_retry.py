"""RetryPolicy.call: its first attempt runs outside tenacity (issue 30); what a caller
sees must be what tenacity alone gave: the attempts made, the waits' logging and
``on_retry`` per retry, the last error raised as it is."""

from __future__ import annotations

import logging

import pytest

from outcommit.retry import RetryLater, RetryPolicy


class Flaky:
    """An action failing ``failures`` times (RetryLater, or ``error``), then answering."""

    def __init__(self, failures: int, error: type[Exception] = RetryLater) -> None:
        self.failures, self.error, self.calls = failures, error, 0

    def __call__(self) -> str:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error(OSError(f"failure {self.calls}"))
        return f"answer after {self.calls}"


asked: list[BaseException] = []


def retryable(error: BaseException) -> bool:
    asked.append(error)  # callers count in it (the manifest committer's store.throttled)
    return isinstance(error, RetryLater)


def test_an_action_failing_twice_runs_three_times_logging_each_retry(caplog) -> None:
    action, retried = Flaky(2), []
    asked.clear()
    with caplog.at_level(logging.INFO, logger="outcommit.retry"):
        answer = RetryPolicy(attempts=4, backoff=0).call(action, retry_if=retryable, what="the request",
                                                         on_retry=retried.append)
    assert (answer, action.calls) == ("answer after 3", 3)
    assert [str(e) for e in retried] == ["failure 1", "failure 2"]
    assert [str(e) for e in asked] == ["failure 1", "failure 2"]  # once per failure
    assert [r.getMessage() for r in caplog.records] == [
        "the request failed (attempt 1 of 4: failure 1); retrying",
        "the request failed (attempt 2 of 4: failure 2); retrying"]


def test_the_last_error_is_raised_once_the_attempts_are_spent() -> None:
    action, retried = Flaky(10), []
    asked.clear()
    with pytest.raises(RetryLater, match="failure 3"):
        RetryPolicy(attempts=3, backoff=0).call(action, retry_if=retryable, on_retry=retried.append)
    assert (action.calls, len(retried), len(asked)) == (3, 2, 3)


@pytest.mark.parametrize("attempts", [1, 5])
def test_an_error_not_retryable_or_a_single_attempt_is_raised_at_once(attempts: int) -> None:
    refused, retried = Flaky(1, error=ValueError), []
    with pytest.raises(ValueError, match="failure 1"):
        RetryPolicy(attempts=attempts, backoff=0).call(refused, retry_if=retryable, on_retry=retried.append)
    once = Flaky(1)
    if attempts == 1:
        with pytest.raises(RetryLater):
            RetryPolicy(attempts=1, backoff=0).call(once, retry_if=retryable, on_retry=retried.append)
        assert once.calls == 1
    assert (refused.calls, retried) == (1, [])


def test_a_first_success_is_returned_without_retrying() -> None:
    action = Flaky(0)
    assert RetryPolicy(attempts=8, backoff=0).call(action, retry_if=retryable) == "answer after 1"
    assert action.calls == 1
