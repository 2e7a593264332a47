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

import dataclasses
import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from cluster_helpers import Target
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
    sessions = SparkSessions(spark_cluster, tmp_path_factory.mktemp("spark-hooks"), WORKERS)
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
def hooks(spark_sessions: SparkSessions) -> Iterator[Any]:
    """The executors' test hooks (``outcommit_devtools.sparkhooks``): hold a write, busy workers."""
    from outcommit_devtools.sparkhooks import Hooks

    hooks = Hooks(spark_sessions.hooks_dir)
    yield hooks
    hooks.clear()


@pytest.fixture
def figures(request: pytest.FixtureRequest) -> Figures:
    """This test's row in the figures table printed at the end of the run."""
    row = Figures(test=request.node.name)
    request.config.stash.setdefault(FIGURES, []).append(row)
    return row


@pytest.fixture
def local_dest(tmp_path: Path) -> str:
    return f"file://{tmp_path}/out-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def target_on(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[str], Target]:
    """``target_on("file"|"s3"|"azure")``: a fresh destination; starts only the servers asked for."""
    container = "spark-cluster"

    def make(store: str) -> Target:
        name = f"t-{uuid.uuid4().hex[:8]}"
        if store == "file":
            return Target(store, f"file://{tmp_path}/{name}", {})
        if store == "s3":
            moto = request.getfixturevalue("moto_server")
            moto.create_bucket(container)
            # Two attempts per request, as users of the embedded server get by default.
            return Target(store, f"s3://{container}/{name}", dataclasses.replace(moto, max_attempts=2).config)
        if store == "azure":
            azurite = request.getfixturevalue("azurite_server")
            azurite.create_container(container)
            return Target(store, f"abfs://{container}/{name}", azurite.config())
        raise ValueError(f"no cluster test store {store!r}")

    return make


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests on the speculative session run after the other Spark tests: one switch, not two."""
    speculative = [i for i in items if "speculative_spark" in getattr(i, "fixturenames", ())]
    if not speculative:
        return
    moved = set(speculative)
    rest = [i for i in items if i not in moved]
    here = Path(__file__).parent
    last = max((n for n, i in enumerate(rest) if here in Path(str(i.path)).parents), default=len(rest) - 1)
    items[:] = [*rest[:last + 1], *speculative, *rest[last + 1:]]


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    rows = config.stash.get(FIGURES, [])
    if not rows:
        return
    terminalreporter.section("Spark cluster figures")
    for line in Figures.table(rows):
        terminalreporter.write_line(line)
