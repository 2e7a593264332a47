"""An executor JVM killed (SIGKILL) mid-write: its task re-runs elsewhere; output exactly once.

The executors' hooks hold the victim task's first attempt at the start of its second file
(``Rule``): its first file is written (for ``magic`` an upload is pending; for ``directory``
the hold is inside task commit, one upload initiated). The holding Python worker records
its parent chain; the test kills the executor JVM at its root, as a lost machine would be
lost, and Spark re-runs the task. Job commit must then leave exactly the re-run's output
and nothing of the dead attempt.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from cluster_helpers import assert_exactly_once
from spark_helpers import events, leftovers

from outcommit_devtools.sparkcluster import executor_pids, kill_executor
from outcommit_devtools.sparkhooks import Rule
from outcommit_devtools.sparkstatus import executors, job_group, task_attempts

pytestmark = [pytest.mark.spark, pytest.mark.cluster]

ROWS, TASKS, VICTIM = 2000, 4, 1
# A bound against a hang, not a timing check: on a loaded 2-core machine the re-run
# after a lost executor took 249 s once (60 s when the machine is otherwise idle).
WRITE_DEADLINE_S = 900.0

CASES = [
    ("file", "v1"), ("file", "manifest"),
    pytest.param("s3", "magic", marks=pytest.mark.s3),
    pytest.param("s3", "directory", marks=pytest.mark.s3),
]


@pytest.fixture
def heals(spark: Any, spark_sessions: Any) -> Iterator[None]:
    """After the test the standalone master has replaced the killed executor (the next tests need two)."""
    yield
    spark_sessions.wait_for_executors(spark)


@pytest.mark.parametrize(("store", "committer"), CASES)
def test_executor_killed_mid_write_reruns_its_task_exactly_once(
        spark: Any, heals: None, hooks: Any, target_on: Any, figures: Any, store: str,
        committer: str) -> None:
    target = target_on(store)
    df = events(spark, rows=ROWS, partitions=TASKS)
    hold = Rule(f"mid-write-{uuid.uuid4().hex[:8]}",
                (target.url.rsplit("/", 1)[1], f"part-{VICTIM:05d}-001-", "-a0."))
    hooks.hold(hold)
    group = f"executor-loss-{uuid.uuid4().hex[:8]}"
    failure: list[BaseException] = []

    def write() -> None:
        # Spark looks Python data sources up in the thread's active session, and a new
        # thread has none on the JVM side (PySpark sets it the same way).
        session_class = type(spark)._get_j_spark_session_class(spark._jvm)
        session_class.setActiveSession(spark._jsparkSession)
        try:
            with job_group(spark, group):
                (df.write.format("outcommit").mode("append").options(**target.config)
                 .option("committer", committer).option("partitionBy", "date").save(target.url))
        except BaseException as exc:
            failure.append(exc)

    writer = threading.Thread(target=write, name="spark-write")
    writer.start()
    held = hooks.wait_held(hold.name, unless=lambda: not writer.is_alive())
    assert held is not None, f"the write ended without reaching the hold: {[str(f)[:3000] for f in failure]}"
    alive = executor_pids(spark.sparkContext.applicationId)
    # The held worker's parent chain leads to one of this application's executor JVMs.
    victim = next((e for e, pid in alive.items() if pid == held.executor_pid), None)
    assert victim is not None and held.executor_pid in held.ancestors, (held, alive)
    # The dead attempt leaves work behind: its first file (or upload) is written.
    partial = [p for p in leftovers(target.url, target.config) if f"part-{VICTIM:05d}-000-" in p]
    assert partial, f"nothing of the held attempt to clean up: {held}"
    kill_executor(held.executor_pid)
    figures.killed = 1
    writer.join(WRITE_DEADLINE_S)
    assert not writer.is_alive(), "the write did not finish after the executor was killed"
    assert failure == []

    attempts = task_attempts(spark, group)
    hooks.wait_idle()
    mine = [a for a in attempts if a.index == VICTIM]
    # Spark saw the executor go, failed the attempt it ran, and re-ran the task elsewhere.
    assert any(a.executor == victim and a.status == "FAILED" for a in mine), mine
    assert [a.executor != victim for a in mine if a.status == "SUCCESS"] == [True], mine
    lost = {e["id"]: e for e in executors(spark)}[victim]
    assert not lost["isActive"], lost
    figures.speculative = sum(1 for a in attempts if a.speculative)
    figures.note = f"executor {victim} lost: {lost.get('removeReason', '')[:40]}"
    assert_exactly_once(target, committer, df.collect(), TASKS, figures)
