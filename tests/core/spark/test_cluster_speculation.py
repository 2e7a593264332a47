"""Speculation on the cluster: a second attempt of a slow task really runs; output stays exactly once.

The slow task is made slow deterministically: its first attempt waits (bounded) until a
speculative copy of it has started, and the copy waits for the first attempt
(``WaitForSpeculativeCopy``); both then get their rows at once and write. Spark destroys
the Python worker of an attempt it kills as soon as the other attempt succeeds, so the
executors' hooks line the two attempts up again at their first write to the store
(``Barrier``): both write side by side, and the one that loses has usually committed its
task too (its data is then duplicated unless the committer or job commit discards it).
Whether the copy ran is read from Spark's own task records; the destination is judged once
every Python worker is idle.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest
from cluster_helpers import assert_exactly_once
from spark_helpers import events

from outcommit_devtools.sparkgates import WaitForSpeculativeCopy
from outcommit_devtools.sparkhooks import Barrier
from outcommit_devtools.sparkstatus import job_group, task_attempts

pytestmark = [pytest.mark.spark, pytest.mark.cluster]

ROWS, TASKS, SLOW = 2000, 4, 0

CASES = [
    ("file", "v1"), ("file", "v2"), ("file", "manifest"),
    pytest.param("azure", "manifest", marks=pytest.mark.azure),
    pytest.param("s3", "magic", marks=pytest.mark.s3),
    pytest.param("s3", "directory", marks=pytest.mark.s3),
    pytest.param("s3", "partitioned", marks=pytest.mark.s3),
]


def reason(error: str) -> str:
    """The gist of a task's error: the last Python exception line, or the first line."""
    lines = [line.strip() for line in error.splitlines()]
    raised = [line for line in lines if re.match(r"^[\w.]+(Error|Exception): ", line)]
    return (raised[-1] if raised else lines[0] if lines else "")[:60]


@pytest.mark.parametrize(("store", "committer"), CASES)
def test_speculative_copy_of_a_slow_task_commits_exactly_once(
        speculative_spark: Any, hooks: Any, target_on: Any, tmp_path: Any, figures: Any,
        store: str, committer: str) -> None:
    spark, target = speculative_spark, target_on(store)
    markers = tmp_path / "markers"
    markers.mkdir()
    df = events(spark, rows=ROWS, partitions=TASKS)
    gated = df.mapInArrow(WaitForSpeculativeCopy(str(markers), partition=SLOW), df.schema)
    # Line both attempts up again at their first write to the store, where the hooks see it
    # (not through adlfs): the one Spark kills has then got as far as the other.
    line_up = Barrier(f"first-write-{uuid.uuid4().hex[:8]}",
                      (target.url.rsplit("/", 1)[1], f"part-{SLOW:05d}-"))
    hooks.barrier(line_up)

    with job_group(spark, f"speculation-{uuid.uuid4().hex[:8]}") as group:
        (gated.write.format("outcommit").mode("append").options(**target.config)
         .option("committer", committer).option("partitionBy", "date").save(target.url))
    attempts = task_attempts(spark, group)  # waits until Spark has ended the losing attempt too
    hooks.wait_idle()  # and until no Python worker is still at it (Spark does not wait for them)

    figures.speculative = sum(1 for a in attempts if a.speculative)
    slow = [a for a in attempts if a.index == SLOW]
    # Spark itself says a speculative copy of the slow task ran, on the other host.
    assert any(a.speculative for a in slow), slow
    assert len({a.host for a in slow}) == 2, slow
    assert sum(1 for a in slow if a.status == "SUCCESS") == 1, slow
    other = next(a for a in slow if a.status != "SUCCESS")
    wrote = f"{len(hooks.arrived(line_up.name))} wrote" if store != "azure" else "writes not seen"
    figures.note = f"attempt {other.attempt} {other.status.lower()} ({reason(other.error)}); {wrote}"
    assert (markers / f"first-{SLOW}").exists() and (markers / f"spec-{SLOW}").exists()
    assert_exactly_once(target, committer, df.collect(), TASKS, figures)
