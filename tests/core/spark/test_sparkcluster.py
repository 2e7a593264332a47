"""The cluster launcher itself: a cluster that does not come up says why and leaves nothing running."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from outcommit_devtools.sparkcluster import ClusterError, executor_of, start_cluster

pytestmark = [pytest.mark.spark, pytest.mark.cluster]


def processes_with_env(needle: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if needle.encode() in (entry / "environ").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue  # gone, or not ours to read
    return found


def test_a_cluster_that_does_not_come_up_in_time_shows_its_logs_and_stops(tmp_path: Path) -> None:
    with pytest.raises(ClusterError) as info:
        start_cluster(tmp_path, workers=1, deadline_s=0.5)  # no JVM starts that fast
    message = str(info.value)
    assert "did not come up" in message and "1 alive workers" in message
    assert "--- master" in message and "--- worker1" in message  # the log tails
    assert processes_with_env(f"SPARK_WORKER_DIR={tmp_path}/worker1") == []


def test_a_process_outside_spark_has_no_executor() -> None:
    assert executor_of(os.getpid()) is None
