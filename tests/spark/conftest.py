"""One local SparkSession for the whole run (startup costs seconds), and helpers."""

from __future__ import annotations

import os
import shutil
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pyspark = pytest.importorskip("pyspark", minversion="4.0")

if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
    pytest.skip("PySpark tests need Java: apt-get install -y openjdk-17-jre-headless",
                allow_module_level=True)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    # Workers must run this interpreter (pyarrow, outcommit); loopback only.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master("local[2,3]")  # 3 attempts per task: retries happen
               .appName("outcommit-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "4")
               .config("spark.driver.host", "127.0.0.1")
               .getOrCreate())
    session.sparkContext.setLogLevel("FATAL")
    import outcommit.spark

    outcommit.spark.register(session)
    yield session
    session.stop()


@pytest.fixture
def local_dest(tmp_path: Path) -> str:
    return f"file://{tmp_path}/out-{uuid.uuid4().hex[:8]}"
