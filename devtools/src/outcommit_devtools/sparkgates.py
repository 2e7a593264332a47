"""Task-side gates for cluster tests: one partition slow, or failing, at a known point.

A gate is a ``DataFrame.mapInArrow`` function that passes every batch through unchanged;
it runs in the same task as the write, before the data reaches the data source. Gates wait
for observable conditions (a marker file, Spark's own task records) with a deadline, never
for a fixed time. They live in an installed module so executors can unpickle them.

    df.mapInArrow(WaitForSpeculativeCopy(str(markers), partition=0), df.schema)
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

POLL_S = 0.05


class GateTimeout(RuntimeError):
    """The condition a gate waited for never came: the test fails with this, loudly."""


def _context() -> Any:
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None:
        raise RuntimeError("a gate runs only inside a Spark task")
    return context


def _wait(condition: Any, deadline_s: float, what: str, poll_s: float = POLL_S) -> None:
    end = time.monotonic() + deadline_s
    while not condition():
        if time.monotonic() >= end:
            raise GateTimeout(f"gave up after {deadline_s:.0f} s waiting for {what}")
        time.sleep(poll_s)


def _mark(path: str, **data: Any) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump({"pid": os.getpid(), **data}, f)
    os.replace(tmp, path)


@dataclass(frozen=True)
class WaitForSpeculativeCopy:
    """Partition ``partition``'s first attempt waits until a second attempt of it has caught up.

    Each attempt of that partition passes its batches on, then marks itself (``first-<p>``
    for attempt 0, ``spec-<p>`` for a later one: Spark's speculative copy) and waits for
    the other's mark before its input ends. Spark hands a task's rows to the data source's
    writer only when its input has ended, so both writers get all their rows within one
    short poll of each other: neither can finish, and have the other killed, before the
    other has its data; both write and both try to commit. Without speculation the first
    attempt waits out the deadline and fails.
    """

    marker_dir: str
    partition: int
    deadline_s: float = 120.0
    poll_s: float = 0.005  # the head start one attempt can get over the other

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        context = _context()
        index, attempt = context.partitionId(), context.attemptNumber()
        yield from batches
        if index == self.partition:
            first = os.path.join(self.marker_dir, f"first-{index}")
            spec = os.path.join(self.marker_dir, f"spec-{index}")
            mine, other = (first, spec) if attempt == 0 else (spec, first)
            _mark(mine, attempt=attempt)
            _wait(lambda: os.path.exists(other), self.deadline_s,
                  f"the other attempt of partition {index} (attempt {attempt} waiting)", self.poll_s)


@dataclass(frozen=True)
class FailAfterOthersSucceeded:
    """Partition ``partition`` raises once Spark records every other task of its stage as successful.

    Every attempt of it fails the same way, so the job fails after the other tasks have
    written and committed. ``ui_api`` is the driver's ``.../api/v1/applications/<appId>``.
    """

    ui_api: str
    partition: int
    others: int
    deadline_s: float = 120.0

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        from .sparkstatus import successful_tasks_elsewhere

        context = _context()
        if context.partitionId() == self.partition:
            stage = context.stageId()
            _wait(lambda: successful_tasks_elsewhere(self.ui_api, stage, self.partition) >= self.others,
                  self.deadline_s, f"{self.others} other tasks of stage {stage} to succeed")
            raise RuntimeError(f"poisoned partition {self.partition} "
                               f"(attempt {context.attemptNumber()}): the job must fail")
        yield from batches
