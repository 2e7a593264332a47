"""The uploads of one task attempt, kept in the memory of the process that writes them.

Hadoop's magic committer can track its commits in memory instead of saving a ``.pending``
file, a marker and a liveness check per file: the task commit of the same process knows
every upload. Here that is the default for an attempt set up in this process. Uploads
start, and parts and the last part of each file go, to a small per-attempt pool while the
writer goes on encoding. The bytes in flight are the memory bound: at most ``threads``
parts' worth, and a writer that gets ahead waits. Requests that carry little or no data
(starting an upload, a small file's only part) are held back only by the connections:
the pool runs as many requests at once as the committer has threads (the store's
connections, 64 on S3), at least ``REQUESTS_PER_THREAD`` times ``threads``. A pool of a
fixed 16 made a task of 125 small files 16 round trips of creates and parts; now its
files start and finish in one or two rounds, as ``pyarrow.dataset.write_dataset``'s do.

Failures of that background work surface at the latest at task commit, which fails the
attempt (and aborts its uploads); a part of a large file fails its ``close()``.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any, TypeVar

from outcommit.multipart import MultipartUploads
from outcommit.paths import is_inside

from .files import PendingCommit

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Requests in flight per attempt for each part's worth of memory (``threads``), at least.
REQUESTS_PER_THREAD = 4


class ByteBudget:
    """At most ``limit`` bytes in flight; a bigger request counts as ``limit`` (it waits
    until it is alone)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self._changed = threading.Condition()

    def acquire(self, size: int) -> int:
        size = min(size, self.limit)
        with self._changed:
            self._changed.wait_for(lambda: self.used + size <= self.limit)
            self.used += size
        return size

    def release(self, size: int) -> None:
        with self._changed:
            self.used -= size
            self._changed.notify_all()


class AttemptUploads:
    """In-memory record of an attempt's finished uploads, and the pool that finishes them."""

    def __init__(self, mp: MultipartUploads, threads: int, requests: int = 0) -> None:
        """``threads``: parts' worth of bytes in flight (the memory bound); ``requests``:
        requests in flight at most (the store's connections), never fewer than
        ``REQUESTS_PER_THREAD * threads``. The pool's threads start only as work comes."""
        self.mp = mp
        self._pool = ThreadPoolExecutor(max_workers=max(threads * REQUESTS_PER_THREAD, requests),
                                        thread_name_prefix="outcommit-upload")
        self._budget = ByteBudget(threads * mp.part_size)
        self._lock = threading.RLock()  # settle() may run from __del__ in a thread holding it
        self._records: dict[str, tuple[int, PendingCommit]] = {}  # magic path -> (close order, commit)
        self._futures: set[Future[None]] = set()
        self._errors: list[BaseException] = []
        self._order = itertools.count()
        # Uploads started when their file was opened, until the file is closed or discarded:
        # any still here when the attempt ends (committed or aborted) is aborted then.
        self._started: dict[Future[str], str] = {}
        #: The filesystem went to another process: its writers save ``.pending`` data there.
        self.shared = False

    # -- background work -----------------------------------------------------------------
    def submit(self, work: Callable[[], T], size: int = 0, after: Future[Any] | None = None) -> Future[T]:
        """Run ``work``, which holds ``size`` bytes, in the pool; waits while the bytes
        already in flight leave no room for it. ``after``: the work goes to the pool only
        once that future is done (a file's last part after its upload's start): a part
        waiting in a thread for its start held one of the pool's threads, so a task of many
        small files had only half its requests on the wire."""
        held = self._budget.acquire(size)
        try:
            future = self._pool.submit(work) if after is None or after.done() else \
                self._when_done(after, work)
        except BaseException:
            self._budget.release(held)
            raise
        future.add_done_callback(lambda _f: self._budget.release(held))
        return future

    def _when_done(self, after: Future[Any], work: Callable[[], T]) -> Future[T]:
        """A future of ``work``, submitted to the pool when ``after`` is done."""
        outer: Future[T] = Future()

        def settle(inner: Future[T]) -> None:
            error = inner.exception()
            if error is not None:
                outer.set_exception(error)
            else:
                outer.set_result(inner.result())

        def launch(_after: Future[Any]) -> None:
            try:  # a callback's exception would be lost: the future carries it
                self._pool.submit(work).add_done_callback(settle)
            except BaseException as exc:
                outer.set_exception(exc)

        after.add_done_callback(launch)
        return outer

    def start(self, final_path: str, initiate: Callable[[], str]) -> Future[str]:
        """Start the upload of a file just opened, in the pool; tracked until :meth:`settle`."""
        future = self.submit(initiate)
        with self._lock:
            self._started[future] = final_path
        return future

    def settle(self, started: Future[str]) -> None:
        """The file of an upload started by :meth:`start` was closed or discarded: its
        upload is now the file's (recorded, or aborted by it)."""
        with self._lock:
            self._started.pop(started, None)

    def finish(self, path: str, work: Callable[[], PendingCommit], size: int = 0,
               after: Future[Any] | None = None) -> None:
        """Finish a closed file (``size`` bytes left to upload) in the background, once
        ``after`` (its upload's start) is done, then record its upload under ``path``."""
        order = next(self._order)  # a later close of the same path wins, whatever finishes first

        def run() -> None:
            try:
                self._record(path, order, work())
            except BaseException as exc:
                with self._lock:
                    self._errors.append(exc)
                raise

        future = self.submit(run, size, after)
        with self._lock:
            self._futures.add(future)
        future.add_done_callback(self._done)

    def _done(self, future: Future[None]) -> None:
        with self._lock:
            self._futures.discard(future)

    def _record(self, path: str, order: int, commit: PendingCommit) -> None:
        with self._lock:
            previous = self._records.get(path)
            if previous is None or previous[0] < order:
                self._records[path] = (order, commit)
                superseded = previous[1] if previous is not None else None
            else:
                superseded = commit  # a later close of this path finished first
        if superseded is not None:
            # The same path written again: the replaced upload must not leak.
            self.mp.abort(superseded.path, superseded.upload_id)

    def wait(self) -> list[BaseException]:
        """Wait for every file closed so far; the failures of their background work."""
        while True:
            with self._lock:
                futures = set(self._futures)
            if not futures:
                break
            wait(futures)
        with self._lock:
            return list(self._errors)

    # -- what was recorded ---------------------------------------------------------------
    def commits(self) -> list[PendingCommit]:
        with self._lock:
            return sorted((c for _, c in self._records.values()), key=lambda c: c.key)

    def take(self, path: str, recursive: bool) -> list[PendingCommit]:
        """Forget the uploads at ``path`` (or below it); they are the caller's to abort."""
        self.wait()
        with self._lock:
            chosen = [p for p in self._records if p == path or (recursive and is_inside(p, path))]
            return [self._records.pop(p)[1] for p in chosen]

    def __bool__(self) -> bool:
        with self._lock:
            return bool(self._records or self._futures)

    def close(self) -> None:
        """End of the attempt: no more work; uploads of files still open are aborted (a
        later close of such a file fails, as the pool is gone)."""
        self._pool.shutdown(wait=True)
        with self._lock:
            orphans, self._started = list(self._started.items()), {}
        for started, final_path in orphans:
            abort_started(self.mp, final_path, started, log)


def abort_started(mp: MultipartUploads, final_path: str, started: Future[str],
                  logger: logging.Logger | logging.LoggerAdapter) -> None:  # type: ignore[type-arg]
    """Abort the upload ``started`` created for a file that will never be finished."""
    try:
        if started.exception() is None:
            mp.abort(final_path, started.result())
    except Exception:
        logger.warning("could not abort the upload of %s, whose file was never finished", final_path,
                       exc_info=True)
