"""The outcommit data source on Azurite: blocklist (the Blob account default) and manifest."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from spark_helpers import DATES, as_strings, events, leftovers, read_back, visible_files, wait_for_stragglers

from outcommit import load_success, open_store

pytestmark = [pytest.mark.spark, pytest.mark.azure]
CONTAINER = "spark-tests"


@pytest.fixture(scope="module")
def azurite(azurite_server: Any) -> Any:
    azurite_server.create_container(CONTAINER)
    return azurite_server


@pytest.fixture
def abfs_dest(azurite: Any) -> str:
    return f"abfs://{CONTAINER}/t-{uuid.uuid4().hex[:8]}"


def test_blocklist_exactly_once_with_a_failed_first_attempt(spark: Any, azurite: Any,
                                                            abfs_dest: str) -> None:
    config = azurite.config()
    df = events(spark, rows=2000, partitions=3)
    (df.write.format("outcommit").mode("append").options(**config)
       .option("partitionBy", "date").option("_failTaskOnce", "1").save(abfs_dest))

    assert sorted(read_back(abfs_dest, config)) == sorted(as_strings(df.collect()))
    files = visible_files(abfs_dest, config)
    assert {f.split("/")[0] for f in files} == {f"date={d}" for d in DATES}
    assert not any("part-00001" in f and "-a0." in f for f in files)
    assert leftovers(abfs_dest, config) == []
    store = open_store(abfs_dest, config)
    summary = load_success(store, store.join(store.strip(abfs_dest), "_SUCCESS"))
    assert (summary.committer, summary.success) == ("blocklist", True)
    assert summary.diagnostics["selection"] == "default committer for abfs://"
    assert summary.metrics["rows.written"] == 2000


def test_manifest_failed_job_leaves_nothing_visible(spark: Any, azurite: Any, abfs_dest: str) -> None:
    from pyspark.sql import functions as F

    config = azurite.config()
    df = events(spark, rows=1500, partitions=3).withColumn(
        "checked", F.assert_true(F.col("id") != 1499, "poisoned row"))
    with pytest.raises(Exception, match="poisoned row"):
        (df.write.format("outcommit").mode("append").options(**config)
           .option("committer", "manifest").save(abfs_dest))
    wait_for_stragglers(spark)
    assert visible_files(abfs_dest, config) == []
    assert leftovers(abfs_dest, config) == []
