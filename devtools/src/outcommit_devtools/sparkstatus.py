"""Spark's own record of what ran: task attempts and executors, from the driver's REST API.

Tests assert from this what Spark did (a speculative copy launched, an executor lost, a task
re-run) instead of assuming it. The driver's status store is filled by a listener that runs
behind the scheduler, and a losing speculative attempt may end after its job: the readers
here wait, with a deadline, until every attempt they report has ended.

Needs ``spark.ui.enabled=true`` (the REST API is served by the UI's server).
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from .sparkcluster import wait_until

ENDED = ("SUCCESS", "FAILED", "KILLED")


@dataclass(frozen=True)
class TaskAttempt:
    """One task attempt as Spark's status store reports it."""

    stage: int
    index: int
    attempt: int
    speculative: bool
    status: str
    executor: str
    host: str
    error: str
    duration_ms: int = 0


def api(spark: Any) -> str:
    """``http://host:port/api/v1/applications/<appId>`` of this session's driver."""
    sc = spark.sparkContext
    if not sc.uiWebUrl:
        raise RuntimeError("the Spark UI is disabled: start the session with spark.ui.enabled=true")
    return f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}"


def get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.load(response)


@contextmanager
def job_group(spark: Any, group: str) -> Iterator[str]:
    """Tag the Spark jobs this thread starts, so their tasks can be found afterwards."""
    sc = spark.sparkContext
    sc.setJobGroup(group, group)
    try:
        yield group
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
        sc.setLocalProperty("spark.job.description", None)


def jobs(spark: Any, group: str) -> list[dict[str, Any]]:
    return [j for j in get(f"{api(spark)}/jobs") if j.get("jobGroup") == group]


def _attempts(base: str, stage: int) -> list[TaskAttempt]:
    found = []
    for stage_attempt in get(f"{base}/stages/{stage}"):
        tasks = get(f"{base}/stages/{stage}/{stage_attempt['attemptId']}/taskList?length=100000")
        found += [TaskAttempt(stage, t["index"], t["attempt"], bool(t.get("speculative")), t["status"],
                              str(t.get("executorId", "")), str(t.get("host", "")),
                              str(t.get("errorMessage", "")), int(t.get("duration") or 0)) for t in tasks]
    return found


def task_attempts(spark: Any, group: str, deadline_s: float = 120.0) -> list[TaskAttempt]:
    """Every task attempt of the jobs of ``group``, once the jobs and all their attempts have ended."""
    base = api(spark)

    def settled() -> list[TaskAttempt] | None:
        tagged = jobs(spark, group)
        if not tagged or any(j["status"] in ("RUNNING", "UNKNOWN") for j in tagged):
            return None
        attempts = [a for j in tagged for s in sorted(set(j["stageIds"])) for a in _attempts(base, s)]
        return attempts if attempts and all(a.status in ENDED for a in attempts) else None

    result: list[TaskAttempt] = wait_until(settled, deadline_s, f"the jobs of group {group!r} to end", 0.2)
    return result


def executors(spark: Any, everything: bool = True) -> list[dict[str, Any]]:
    """The application's executors, the driver excluded (``everything``: removed ones too)."""
    which = "allexecutors" if everything else "executors"
    return [e for e in get(f"{api(spark)}/{which}") if e["id"] != "driver"]


def active_executors(spark: Any) -> int:
    return sum(1 for e in executors(spark, everything=False) if e.get("isActive"))


def successful_tasks_elsewhere(ui_api: str, stage: int, index: int) -> int:
    """Tasks of ``stage`` (any attempt of it), other than ``index``, that Spark records as successful.

    Called from inside a task (the driver's UI is reachable from every executor here).
    """
    done = set()
    for stage_attempt in get(f"{ui_api}/stages/{stage}"):
        tasks = get(f"{ui_api}/stages/{stage}/{stage_attempt['attemptId']}/taskList?length=100000")
        done |= {t["index"] for t in tasks if t["index"] != index and t["status"] == "SUCCESS"}
    return len(done)
