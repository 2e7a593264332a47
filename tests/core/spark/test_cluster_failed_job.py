"""A job that fails after its other tasks committed: nothing visible, nothing pending, on each store.

The poisoned partition waits until Spark records every other task of the stage as
successful (``FailAfterOthersSucceeded`` asks the driver's REST API from inside the task),
then fails on every attempt: the job fails with committed tasks behind it, and the data
source's abort must remove their output, temporary state and pending uploads.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from cluster_helpers import assert_nothing_visible
from spark_helpers import events, wait_for_stragglers

from outcommit_devtools.sparkgates import FailAfterOthersSucceeded
from outcommit_devtools.sparkstatus import api, job_group, jobs, task_attempts

pytestmark = [pytest.mark.spark, pytest.mark.cluster]

ROWS, TASKS, POISONED = 2000, 4, 3

CASES = [
    ("file", "v1"), ("file", "v2"), ("file", "manifest"),
    pytest.param("azure", "manifest", marks=pytest.mark.azure),
    pytest.param("s3", "magic", marks=pytest.mark.s3),
    pytest.param("s3", "partitioned", marks=pytest.mark.s3),
]


@pytest.mark.parametrize(("store", "committer"), CASES)
def test_job_failing_after_tasks_committed_leaves_nothing(
        spark: Any, target_on: Any, figures: Any, store: str, committer: str) -> None:
    target = target_on(store)
    df = events(spark, rows=ROWS, partitions=TASKS)
    poisoned = df.mapInArrow(FailAfterOthersSucceeded(api(spark), POISONED, TASKS - 1), df.schema)

    with job_group(spark, f"failed-job-{uuid.uuid4().hex[:8]}") as group, \
            pytest.raises(Exception, match=f"poisoned partition {POISONED}"):
        (poisoned.write.format("outcommit").mode("append").options(**target.config)
         .option("committer", committer).option("partitionBy", "date").save(target.url))
    wait_for_stragglers(spark)

    attempts = task_attempts(spark, group)
    assert [j["status"] for j in jobs(spark, group)] == ["FAILED"]
    # Spark ran every other task to success before the job failed: their tasks committed.
    assert {a.index for a in attempts if a.status == "SUCCESS"} == set(range(TASKS)) - {POISONED}
    assert sum(1 for a in attempts if a.index == POISONED and a.status == "FAILED") == 3
    figures.committer = committer  # rows in stays 0: a failed job must make no row visible
    figures.note = f"{TASKS - 1} of {TASKS} tasks committed, then the job failed"
    assert_nothing_visible(target, figures)
