"""Every Spark test runs on a standalone cluster: one master, two one-core workers, per run.

``local[N]`` runs all tasks in one executor JVM, where Spark never speculates and no
executor can be lost; here every task attempt runs in one of two executor JVMs, each with
its own Python workers. The cluster (``outcommit_devtools.sparkcluster``) starts once per
test run; the session on it is switched only for tests that need other settings
(:mod:`spark_sessions`), and those tests run last so that happens once.

The cluster tests record their figures (speculative attempts, executors killed, rows in
and out, uploads left) and the run ends with a table of them.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from spark_helpers import Figures
from spark_sessions import SparkSessions

pyspark = pytest.importorskip("pyspark", minversion="4.0")

if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
    pytest.skip("PySpark tests need Java: apt-get install -y openjdk-17-jre-headless",
                allow_module_level=True)

WORKERS = 2
FIGURES = pytest.StashKey[list[Figures]]()


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from outcommit_devtools.sparkcluster import start_cluster

    with start_cluster(tmp_path_factory.mktemp("spark-cluster"), workers=WORKERS) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def spark_sessions(spark_cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSessions]:
    sessions = SparkSessions(spark_cluster, tmp_path_factory.mktemp("spark-holds"), WORKERS)
    yield sessions
    sessions.stop()


@pytest.fixture
def spark(spark_sessions: SparkSessions) -> Any:
    """The cluster session without speculation (retry counts are exact)."""
    return spark_sessions.get("default")


@pytest.fixture
def speculative_spark(spark_sessions: SparkSessions) -> Any:
    """The cluster session with ``spark.speculation=true`` and eager thresholds."""
    return spark_sessions.get("speculation")


@pytest.fixture
def holds(spark_sessions: SparkSessions) -> Iterator[Any]:
    """Rules that hold a write in the executors' Python workers (``outcommit_devtools.sparkhold``)."""
    from outcommit_devtools.sparkhold import HoldDir

    hold_dir = HoldDir(spark_sessions.hold_dir)
    yield hold_dir
    hold_dir.clear()


@pytest.fixture
def figures(request: pytest.FixtureRequest) -> Figures:
    """This test's row in the figures table printed at the end of the run."""
    row = Figures(test=request.node.name)
    request.config.stash.setdefault(FIGURES, []).append(row)
    return row


@pytest.fixture
def local_dest(tmp_path: Path) -> str:
    return f"file://{tmp_path}/out-{uuid.uuid4().hex[:8]}"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests on the speculative session run last: the session is then switched only once."""
    speculative = [i for i in items if "speculative_spark" in getattr(i, "fixturenames", ())]
    if speculative:
        moved = set(speculative)
        items[:] = [i for i in items if i not in moved] + speculative


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    rows = config.stash.get(FIGURES, [])
    if not rows:
        return
    terminalreporter.section("Spark cluster figures")
    for line in Figures.table(rows):
        terminalreporter.write_line(line)
