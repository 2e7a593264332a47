"""Job commit's completions fanned out to processes on the driver (issue 30).

One Python process completes at most ~500-600 uploads a second, whatever its
connections: each completion costs 1.5-2 ms of client CPU through botocore here
(``benchmarks/job_commit_model.py``). With ``outcommit.job-commit.processes`` above 1 the
``complete`` stage hands its uploads to that many processes:

* uploads are grouped by directory (the key prefix S3 rates), and each group goes whole
  to one process (groups balanced by count, largest first), so a prefix's request rate
  is limited in exactly one place: a token bucket per prefix in that process
  (``outcommit.job-commit.prefix-rate``, S3's published 3,500 PUT/s by default);
* each process makes the committer again from its installed components, the destination
  and the configuration (the factory's, as a filesystem sent to another process is), and
  completes its share on the committer's threads with the same call as in process
  (``MultipartUploads.complete``: idempotent, decided by evidence when an answer is lost);
* each answers with every upload's etag or its error; the driver checks that every upload
  has its answer before the stage ends, so ``_SUCCESS`` never names an unverified file.

A store that lives in this process only (a memory store, a fault-injecting wrapper) cannot
be reached from another: the option is for real object stores.

The processes are spawned: each imports the driver's ``__main__`` script again, so a script
without an ``if __name__ == "__main__":`` guard would run again in each, its whole job too.
Such a script is refused before any process starts (:func:`check_main_guarded`). A worker
whose driver is gone (killed) stops before its next completion: nobody would read its answer.
"""

from __future__ import annotations

import ast
import multiprocessing
import os
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from multiprocessing import get_context
from typing import Any, Protocol

from outcommit.config import Config
from outcommit.errors import CommitError, ConfigError, DestinationExistsError, JobCommitError
from outcommit.progress import Progress
from outcommit.store import Store

from .files import PendingCommit

PROCESSES_KEY = "outcommit.job-commit.processes"
PREFIX_RATE_KEY = "outcommit.job-commit.prefix-rate"
#: S3's published rate per prefix for PUT, COPY, POST and DELETE requests.
S3_PUTS_PER_PREFIX = 3500.0
_GUARD = 'if __name__ == "__main__":'


class FanningOut(Protocol):
    """What the fan-out uses of the committer (``DelayedCompletionCommitter``)."""

    destination: str
    config: Config
    store: Store

    @property
    def name(self) -> str: ...
    def installed(self, needed_by: str) -> Any: ...


def processes(config: Config) -> int:
    return config.get_int(PROCESSES_KEY, 1, minimum=1)


def prefix_rate(config: Config) -> float:
    text = config.get(PREFIX_RATE_KEY)
    try:
        rate = float(text) if text else S3_PUTS_PER_PREFIX
    except ValueError:
        rate = 0.0
    if rate <= 0:
        raise ConfigError(f"{PREFIX_RATE_KEY}={text!r}: give the requests per second one prefix "
                          f"may take (S3: {S3_PUTS_PER_PREFIX:g})")
    return rate


class TokenBucket:
    """At most ``rate`` takes a second, with a burst of one second's worth.

    Each take reserves the next free slot (a virtual schedule: the generic cell rate
    algorithm) and sleeps until it, once: no loop on fractional tokens, which float
    rounding could keep just below one forever."""

    def __init__(self, rate: float, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.interval, self.clock, self.sleep = 1.0 / rate, clock, sleep
        self.burst = (rate - 1) * self.interval  # how far ahead of the schedule a take may be
        self.scheduled = clock()
        self._lock = threading.Lock()

    def take(self) -> None:
        with self._lock:
            now = self.clock()
            slot = max(self.scheduled, now)
            self.scheduled = slot + self.interval
            wait = slot - self.burst - now
        if wait > 0:
            self.sleep(wait)  # rate limiting: the store's published limit, not a synchronisation


def unguarded_main() -> str | None:
    """The driver's ``__main__`` script when spawned processes would run it again: a file
    (not ``python -c``, a notebook or a package's ``__main__``, which spawn does not re-run)
    with no top-level ``if`` on ``__name__``. None when it has one or cannot be read."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    path = getattr(main, "__file__", None)
    if not path or (spec is not None and spec.name.endswith("__main__")):
        return None
    try:
        with open(path, "rb") as fh:
            tree = ast.parse(fh.read(), path)
    except (OSError, SyntaxError, ValueError):
        return None
    for node in tree.body:
        if isinstance(node, ast.If) and any(isinstance(n, ast.Name) and n.id == "__name__"
                                            for n in ast.walk(node.test)):
            return None
    return str(path)


def check_main_guarded(count: int) -> None:
    """Refuse a driver script without the guard before any process starts: each spawned
    process would import it again and run its job again (files written twice, uploads
    left pending), then fail starting processes of its own."""
    path = unguarded_main()
    if path is not None:
        raise JobCommitError(
            f"{PROCESSES_KEY}={count}: the driver's script {path} has no `{_GUARD}` guard, and "
            "each job-commit process imports it again (multiprocessing spawn) and would run its "
            f"job again; put the script's work under the guard, or set {PROCESSES_KEY}=1 "
            "(nothing was completed: job commit can be retried)")


def prefix_of(commit: PendingCommit) -> str:
    return commit.path.rpartition("/")[0]


def shares(commits: Sequence[PendingCommit], count: int) -> list[list[int]]:
    """Indexes of ``commits`` for ``count`` processes: whole prefixes, balanced by count."""
    groups: dict[str, list[int]] = defaultdict(list)
    for index, commit in enumerate(commits):
        groups[prefix_of(commit)].append(index)
    loads: list[list[int]] = [[] for _ in range(count)]
    for group in sorted(groups.values(), key=len, reverse=True):
        min(loads, key=len).extend(group)
    return [load for load in loads if load]


@dataclass(frozen=True)
class Answer:
    """One upload's outcome in a worker: its etag, or its error (kind and message)."""

    index: int
    etag: str | None = None
    error: str | None = None
    exists: bool = False


def complete_share(components: Any, destination: str, config: dict[str, str], name: str,
                   commits: list[tuple[int, PendingCommit]], rate: float,
                   if_none_match: bool) -> list[Answer]:
    """In a worker process: complete ``commits`` (index, the driver's validated commit) with
    a committer made again from its components; a token bucket per prefix."""
    from outcommit.parallel import outcomes

    committer = components.create_committer(destination, config, name)
    buckets: dict[str, TokenBucket] = {}
    for _, commit in commits:
        buckets.setdefault(prefix_of(commit), TokenBucket(rate))
    driver = multiprocessing.parent_process()

    def complete(item: tuple[int, PendingCommit]) -> str:
        buckets[prefix_of(item[1])].take()
        if driver is not None and not driver.is_alive():
            # The driver was killed: no one reads this answer, and the pool's worker loop
            # would wait for work forever. Stop before another file becomes visible; the
            # job's abort or a retried commit decides the uploads left pending.
            os._exit(1)
        return str(committer.ops.complete_one(item[1], if_none_match))

    answers = []
    for outcome in outcomes(complete, commits, committer.threads, "outcommit-fanout"):
        index = outcome.item[0]
        if outcome.error is None:
            answers.append(Answer(index, etag=outcome.result))
        else:
            answers.append(Answer(index, error=f"{type(outcome.error).__name__}: {outcome.error}",
                                  exists=isinstance(outcome.error, FileExistsError)))
    return answers


def complete_all(committer: FanningOut, commits: Collection[PendingCommit], count: int,
                 progress: Progress | None, if_none_match: bool, unfinished: set[tuple[str, str]],
                 when_all_started: Callable[[], object] | None) -> None:
    """Complete ``commits`` in ``count`` processes; raise as ``CommitOperations.complete_all``."""
    ordered = list(commits)
    check_main_guarded(count)
    components = committer.installed(f"{PROCESSES_KEY}={count}")
    config = dict(committer.config.to_dict())
    rate = prefix_rate(committer.config)
    for commit in ordered:
        unfinished.add((commit.path, commit.upload_id))
    answered: dict[int, Answer] = {}
    work = shares(ordered, count)
    with ProcessPoolExecutor(len(work), mp_context=get_context("spawn")) as pool:
        futures = [pool.submit(complete_share, components, committer.destination, config, committer.name,
                               [(i, ordered[i]) for i in share], rate, if_none_match)
                   for share in work]
        if when_all_started is not None:
            when_all_started()
        try:
            for future in as_completed(futures):
                _record(future.result(), ordered, answered, unfinished, progress)
        except BrokenProcessPool as exc:
            raise JobCommitError(
                f"a job-commit process ({PROCESSES_KEY}={count}) died before answering ({exc}): "
                f"killed, out of memory, or the driver's script runs without `{_GUARD}`; "
                "job commit can be retried; abort_job removes what was completed") from exc
    _raise_failures(committer, ordered, answered)


def _record(answers: Sequence[Answer], ordered: Sequence[PendingCommit], answered: dict[int, Answer],
            unfinished: set[tuple[str, str]], progress: Progress | None) -> None:
    """One process's answers: completed uploads are no longer unfinished."""
    for answer in answers:
        answered[answer.index] = answer
        if answer.error is None:
            commit = ordered[answer.index]
            unfinished.discard((commit.path, commit.upload_id))
        if progress is not None:
            progress.advance()


def _raise_failures(committer: FanningOut, ordered: Sequence[PendingCommit],
                    answered: Mapping[int, Answer]) -> None:
    """Every upload must have its etag: the result is verified before ``_SUCCESS``."""
    missing = [i for i in range(len(ordered)) if i not in answered]
    failed = [a for a in answered.values() if a.error is not None]
    taken = [a for a in failed if a.exists]
    if taken:
        raise DestinationExistsError(
            f"{len(taken)} files appeared in the destination during job commit, e.g. "
            f"{committer.store.url(ordered[taken[0].index].path)}, and the conflict mode is 'fail': "
            "they were not replaced. abort_job removes what this job completed")
    if failed or missing:
        first = failed[0] if failed else None
        where = ordered[first.index if first else missing[0]].path
        reason = first.error if first else "no answer from its process"
        raise CommitError(f"{len(failed) + len(missing)} of {len(ordered)} uploads could not be "
                          f"completed, e.g. {committer.store.url(where)}: {reason}. Job commit can "
                          "be retried; abort_job removes what was completed")
