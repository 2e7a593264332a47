"""Where a task attempt is committed, for engines that cannot ask a commit coordinator.

Hadoop and Spark commit a task on the executor only after the driver's commit
coordinator has allowed that attempt, so at most one attempt of a task ever commits.
A PySpark data source's task (and a Ray or Dask task) returns its message before any
coordinator has decided: every attempt that finishes, speculative copies included, would
commit. That is harmless only for committers with ``task-commit.isolated`` (each
attempt's commit is its own, and job commit takes exactly the accepted messages). For
the others (``v1`` renames over the task's one committed directory, ``v2`` publishes
into the destination) the task only writes, and the driver commits the attempts it
accepted, right before job commit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .. import capabilities as caps
from ..committer import Committer
from ..context import JobContext
from ..parallel import run_all


def commits_on_executor(committer: Committer) -> bool:
    """May a task attempt commit itself, without the driver's permission?"""
    return committer.has_capability(caps.TASK_COMMIT_ISOLATED)


def commit_accepted_attempts(committer: Committer, job: JobContext,
                             attempts: Sequence[tuple[int, int]]) -> list[Mapping[str, Any]]:
    """Commit (task index, attempt) pairs on the driver; their messages, in the same order.

    Only the attempts the engine accepted are committed: a losing attempt's output stays
    in its own work area, which job commit or abort removes with the job's temporary state.
    """
    def commit(pair: tuple[int, int]) -> Mapping[str, Any]:
        return committer.commit_task(job.task_attempt(*pair))

    return run_all(commit, attempts, committer.threads, "outcommit-task-commit")
