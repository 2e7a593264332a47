"""Spark sessions on the test cluster, one at a time, switched only when a test needs others.

A Python process can hold one SparkContext, and settings such as ``spark.speculation``
are read when it starts. Tests ask for a *profile*; the manager keeps the running session
while the profile stays the same and restarts it (about 10 s: new executors) when it
changes. Speculation stays off for every test that counts retries exactly.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from outcommit_devtools import sparkhooks, sparkstatus
from outcommit_devtools.sparkcluster import SparkCluster, free_port, wait_until

BASE_CONF = {
    "spark.task.maxFailures": "3",         # 3 attempts per task: the retry tests depend on it
    "spark.ui.enabled": "true",            # the REST API tests read task attempts from
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    # The default for file:// anyway; set on the builder so that a test can show that
    # spark.conf.unset of a builder key takes effect (test_datasource_file).
    "spark.outcommit.committer.file": "v1",
}

PROFILES: dict[str, dict[str, str]] = {
    "default": {},
    # A copy of a task starts once half the tasks have finished and it has run 1.5x their
    # median; Spark's efficiency check (off here) would also want slow record processing.
    "speculation": {
        "spark.speculation": "true",
        "spark.speculation.interval": "100ms",
        "spark.speculation.quantile": "0.5",
        "spark.speculation.multiplier": "1.5",
        "spark.speculation.minTaskRuntime": "100ms",
        "spark.speculation.efficiency.enabled": "false",
    },
}

READY_DEADLINE_S = 180.0


class SparkSessions:
    """The one SparkSession of the test run, on ``cluster``, in the profile last asked for."""

    def __init__(self, cluster: SparkCluster, hooks_dir: Path, workers: int) -> None:
        self.cluster = cluster
        self.hooks_dir = hooks_dir
        self.workers = workers
        self.profile: str | None = None
        self.session: Any = None
        self.starts = 0

    def get(self, profile: str = "default") -> Any:
        if profile != self.profile or self.session is None:
            self.stop()
            self.session = self._start(profile)
            self.profile = profile
        return self.session

    def _start(self, profile: str) -> Any:
        # Python workers run this interpreter (pyarrow, outcommit); loopback only.
        os.environ["PYSPARK_PYTHON"] = sys.executable
        os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        from pyspark.sql import SparkSession

        builder = SparkSession.builder.master(self.cluster.master_url).appName(f"outcommit-tests-{profile}")
        conf = {**BASE_CONF, "spark.ui.port": str(free_port()), **sparkhooks.spark_conf(self.hooks_dir),
                **PROFILES[profile]}
        for key, value in conf.items():
            builder = builder.config(key, value)
        session = builder.getOrCreate()
        session.sparkContext.setLogLevel("FATAL")
        self.starts += 1
        # Every test expects one executor per worker: the speculation and executor-loss
        # tests need two, and a barrier stage (wait_for_stragglers) needs every slot.
        self.wait_for_executors(session)
        import outcommit.spark

        outcommit.spark.register(session)
        return session

    def wait_for_executors(self, session: Any, deadline_s: float = READY_DEADLINE_S) -> None:
        wait_until(lambda: sparkstatus.active_executors(session) >= self.workers, deadline_s,
                   f"{self.workers} executors of {session.sparkContext.applicationId}", 0.25)

    def stop(self) -> None:
        if self.session is not None:
            self.session.stop()
        self.session = None
        self.profile = None
