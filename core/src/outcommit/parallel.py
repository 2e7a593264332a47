"""One way to run store requests in parallel, for every committer.

Job commit is a few thousand to a few hundred thousand independent requests (renames,
completions, aborts). They run on a thread pool of ``outcommit.committer.threads``
workers with at most ``2 * threads`` submitted ahead, and items are drawn from their
iterable lazily: memory stays proportional to the threads, not to the number of files.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Generator, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True)
class Outcome(Generic[T, R]):
    """What one item came to: its result, or the error it raised."""

    item: T
    result: R | None = None
    error: BaseException | None = None


def outcomes(fn: Callable[[T], R], items: Iterable[T], threads: int,
             name: str = "outcommit") -> Generator[Outcome[T, R], None, None]:
    """``fn`` over ``items`` on up to ``threads`` threads; every outcome, in item order.

    An error is an outcome, not an exception: callers decide what one failure means
    (abort paths go on; commit paths stop).
    """
    def one(item: T) -> Outcome[T, R]:
        try:
            return Outcome(item, fn(item))
        except Exception as exc:
            return Outcome(item, None, exc)

    if threads <= 1:
        yield from (one(item) for item in items)
        return
    window: deque[Future[Outcome[T, R]]] = deque()
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix=name) as pool:
        try:
            for item in items:
                window.append(pool.submit(one, item))
                if len(window) >= 2 * threads:
                    yield window.popleft().result()
            while window:
                yield window.popleft().result()
        finally:
            for future in window:  # the caller stopped early: nothing more starts
                future.cancel()


def run_all(fn: Callable[[T], R], items: Iterable[T], threads: int,
            name: str = "outcommit") -> list[R]:
    """``fn`` over ``items`` in parallel; the results in order, or the first error raised.

    After a failure nothing new starts; requests already running finish first.
    """
    results: list[R] = []
    stream = outcomes(fn, items, threads, name)
    try:
        for outcome in stream:
            if outcome.error is not None:
                raise outcome.error
            results.append(outcome.result)  # type: ignore[arg-type]
    finally:
        stream.close()
    return results
