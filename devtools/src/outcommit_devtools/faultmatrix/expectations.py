"""What each cell must show, derived from the committer's declared capabilities.

The default is docs/protocol.md#correctness-properties for everyone: the job commits
exactly the committed attempts' output, or fails loudly with nothing newly visible;
nothing leaks; nothing outside the destination changes. A committer that does not declare a capability has a
*limit*: a cell whose only deviation is that limit is classified ``limit`` (listed with
the safe alternative), never passed silently. A capability a committer does declare is
a promise: where it promises success, a loud failure is WRONG.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from outcommit import capabilities as caps

from .scenarios import DriverKill, HostileNames, JobsLayout, Scenario, StoreFault, TaskFailure
from .storefaults import CAUSES, MISLEADING

Has = Callable[[str], bool]


@dataclass(frozen=True)
class Limit:
    """A documented limit: shown by every committer lacking ``lacking`` (None: by every committer)."""

    id: str
    lacking: str | None
    text: str
    alternative: str
    #: May the output of attempts that reached task commit be visible after a failure?
    allows_written: bool = False
    #: May part of the job's own output be visible after a failure?
    allows_partial: bool = False
    #: May conflict mode ``replace`` have deleted the old data after a failure?
    allows_replaced: bool = False


VISIBLE_EARLY = Limit(
    "visible-early", caps.OUTPUT_INVISIBLE_UNTIL_JOB_COMMIT,
    "task commit publishes into the destination: a failed or aborted job leaves the files of the "
    "attempts that committed, and conflict mode replace deletes the old data at job setup",
    "a committer declaring output.invisible-until-job-commit (v1, manifest, magic, directory, "
    "partitioned)", allows_written=True, allows_replaced=True)
PARTIAL_JOB_COMMIT = Limit(
    "partial-job-commit", caps.JOB_COMMIT_REPEATABLE,
    "an interrupted job commit leaves part of the output visible; it cannot be called again "
    "(refused as not repeatable) and abort does not withdraw what was already merged",
    "manifest (file, gs, abfs) or magic/directory/partitioned (s3): job commit repeatable",
    allows_partial=True, allows_replaced=True)
LOST_TASK_COMMIT = Limit(
    "lost-task-commit", caps.TASK_COMMIT_REPEATABLE,
    "a task commit whose outcome is unknown cannot be repeated: the engine fails the job",
    "a committer declaring task-commit.repeatable")
REPLACE_NOT_ATOMIC = Limit(
    "replace-not-atomic", None,
    "conflict mode replace deletes the old data before publishing the new: a job commit "
    "interrupted after that and then aborted (instead of committed again) loses the old data",
    "commit the job again or recover it instead of aborting", allows_replaced=True)

LIMITS: tuple[Limit, ...] = (VISIBLE_EARLY, PARTIAL_JOB_COMMIT, LOST_TASK_COMMIT, REPLACE_NOT_ATOMIC)


@dataclass(frozen=True)
class Expectation:
    """Acceptable outcomes of a cell, the limits it may show, and what a failure must say."""

    outcomes: frozenset[str]
    limits: tuple[Limit, ...] = ()
    causes: tuple[str, ...] = ()
    misleading: tuple[str, ...] = ()
    why: str = field(default="", compare=False)


def _applicable(has: Has, *limits: Limit) -> tuple[Limit, ...]:
    return tuple(limit for limit in limits if limit.lacking is None or not has(limit.lacking))


COMMIT = frozenset({"correct"})
FAIL = frozenset({"loud"})
EITHER = frozenset({"correct", "loud"})


def expect(scenario: Scenario, has: Has) -> Expectation:
    """The expectation of ``scenario`` for a committer whose capabilities ``has`` answers."""
    if isinstance(scenario, TaskFailure):
        return _task(scenario, has)
    if isinstance(scenario, DriverKill):
        return _driver(scenario, has)
    if isinstance(scenario, StoreFault):
        return _store(scenario, has)
    if isinstance(scenario, HostileNames):
        return Expectation(COMMIT, why="a name is a name: no glob, no unquoting, no normalisation")
    return _jobs(scenario, has)


def _task(s: TaskFailure, has: Has) -> Expectation:
    committed_then_lost = s.point in ("during-commit", "after-commit")
    if committed_then_lost and s.flow == "hadoop" and not has(caps.TASK_COMMIT_REPEATABLE):
        return Expectation(FAIL, _applicable(has, LOST_TASK_COMMIT, VISIBLE_EARLY),
                           why="task commit not repeatable: the engine must fail the job")
    return Expectation(COMMIT, why="a retried task is the protocol's basic promise")


def _driver(s: DriverKill, has: Has) -> Expectation:
    if s.then.startswith("abort") and s.point == "after-success":
        return Expectation(COMMIT, why="_SUCCESS was written: the job committed, and an abort "
                                       "after it only deletes the job's temporary state")
    if s.then == "abort-killed-recover":
        return Expectation(EITHER, _applicable(has, VISIBLE_EARLY, PARTIAL_JOB_COMMIT,
                                               *((REPLACE_NOT_ATOMIC,) if s.mode == "replace" else ())),
                           why="an abort began, then a new attempt recovered: it commits the "
                               "job's whole output or fails, leaving nothing")
    if s.then.startswith("abort"):
        # Killed after some operation: the cell knows whether that was past _SUCCESS.
        return Expectation(EITHER if s.point == "operation" else FAIL,
                           _applicable(has, VISIBLE_EARLY, PARTIAL_JOB_COMMIT,
                                       *((REPLACE_NOT_ATOMIC,) if s.mode == "replace" else ())),
                           why="aborted: nothing of the job may stay visible")
    if s.then == "recommit":
        if has(caps.JOB_COMMIT_REPEATABLE):
            return Expectation(COMMIT, why="declares job-commit.repeatable")
        return Expectation(EITHER, _applicable(has, PARTIAL_JOB_COMMIT, VISIBLE_EARLY),
                           why="job commit not repeatable")
    if has(caps.JOB_RECOVERABLE):
        return Expectation(COMMIT, why="declares job.recoverable")
    return Expectation(EITHER, _applicable(has, VISIBLE_EARLY),
                       why="not recoverable: the new job attempt reruns the tasks")


def _store(s: StoreFault, has: Has) -> Expectation:
    causes = CAUSES.get(s.fault, ())
    misleading = MISLEADING.get(s.fault, ())
    if s.sustained:
        return Expectation(FAIL, _applicable(has, VISIBLE_EARLY), causes, misleading,
                           why="a fault that never ends must fail the job, naming it")
    if s.phase in ("tasks", "task-commit") and not has(caps.TASK_COMMIT_REPEATABLE):
        return Expectation(EITHER, _applicable(has, LOST_TASK_COMMIT, VISIBLE_EARLY), causes,
                           misleading, why="task commit not repeatable")
    if s.phase == "job-commit" and not has(caps.JOB_COMMIT_REPEATABLE):
        return Expectation(EITHER, _applicable(has, PARTIAL_JOB_COMMIT), causes, misleading,
                           why="job commit not repeatable: a fault inside it fails the job")
    return Expectation(COMMIT, causes=causes, misleading=misleading,
                       why="a transient fault must be absorbed by retries")


def _jobs(s: JobsLayout, has: Has) -> Expectation:
    if s.layout == "fail-refuses-existing":
        return Expectation(FAIL, causes=("fail",), why="conflict mode fail with data in the destination")
    # 'adjacent' aborts one job after its tasks committed: what v2 published stays.
    return Expectation(COMMIT, _applicable(has, VISIBLE_EARLY),
                       why="jobs with distinct ids must not interfere")
