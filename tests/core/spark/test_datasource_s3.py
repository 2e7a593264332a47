"""The outcommit data source on the moto S3 server: magic and partitioned committers."""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

import pytest
from spark_helpers import DATES, as_strings, events, leftovers, read_back, visible_files, wait_for_stragglers

from outcommit import load_success, open_store

pytestmark = [pytest.mark.spark, pytest.mark.s3]


@pytest.fixture(scope="module")
def moto(moto_server: Any) -> Any:
    moto_server.create_bucket("spark")
    # Two attempts per request, as users get by default with the embedded server.
    return dataclasses.replace(moto_server, max_attempts=2)


@pytest.fixture
def s3_dest(moto: Any) -> str:
    return f"s3://spark/t-{uuid.uuid4().hex[:8]}"


def written(df: Any, moto: Any, dest: str, mode: str = "append", **options: str) -> None:
    df.write.format("outcommit").mode(mode).options(**moto.config, **options).save(dest)


def success_of(url: str, config: dict[str, str]) -> Any:
    store = open_store(url, config)
    return load_success(store, store.join(store.strip(url), "_SUCCESS"))


@pytest.mark.parametrize("committer", ["magic", "partitioned"])
def test_exactly_once_with_a_failed_first_attempt(spark: Any, moto: Any, s3_dest: str,
                                                  committer: str) -> None:
    df = events(spark, rows=4000, partitions=4)
    written(df, moto, s3_dest, committer=committer, partitionBy="date", _failTaskOnce="2")

    assert sorted(read_back(s3_dest, moto.config)) == sorted(as_strings(df.collect()))
    files = visible_files(s3_dest, moto.config)
    assert {f.split("/")[0] for f in files} == {f"date={d}" for d in DATES}
    # The failed attempt 0 of task 2 wrote (and for magic, uploaded) part of its data:
    # none of it is visible and none of its uploads is left pending.
    assert not any("part-00002" in f and "-a0." in f for f in files)
    assert leftovers(s3_dest, moto.config) == []
    summary = success_of(s3_dest, moto.config)
    assert (summary.committer, summary.success) == (committer, True)
    assert summary.metrics["rows.written"] == 4000
    assert summary.metrics["spark.task.retries"] == 1


def test_failed_job_leaves_nothing_visible_and_no_uploads(spark: Any, moto: Any, s3_dest: str) -> None:
    from pyspark.sql import functions as F

    df = events(spark, rows=2000, partitions=4).withColumn(
        "checked", F.assert_true(F.col("id") != 1999, "poisoned row"))
    with pytest.raises(Exception, match="poisoned row"):
        written(df, moto, s3_dest, committer="magic", partitionBy="date")
    wait_for_stragglers(spark)
    assert visible_files(s3_dest, moto.config) == []
    assert leftovers(s3_dest, moto.config) == []
    assert not open_store(s3_dest, moto.config).exists(f"{s3_dest.removeprefix('s3://')}/_SUCCESS")


def test_overwrite_replaces_and_append_adds(spark: Any, moto: Any, s3_dest: str) -> None:
    first, second = events(spark, 500, 2), events(spark, 300, 2, first_id=50_000)
    written(first, moto, s3_dest, committer="magic")
    written(second, moto, s3_dest, committer="magic")
    assert sorted(read_back(s3_dest, moto.config)) == sorted(as_strings(first.collect() + second.collect()))
    written(second, moto, s3_dest, mode="overwrite", committer="magic")
    assert sorted(read_back(s3_dest, moto.config)) == sorted(as_strings(second.collect()))
    assert leftovers(s3_dest, moto.config) == []


def test_spark_config_selects_the_s3_committer(spark: Any, moto: Any) -> None:
    import outcommit.spark

    df = events(spark, rows=200, partitions=2)
    cases = [({"spark.outcommit.committer.s3": "partitioned"}, "partitioned",
              "outcommit.committer.s3=partitioned"),
             ({"spark.hadoop.fs.s3a.committer.name": "partitioned"}, "partitioned",
              "fs.s3a.committer.name=partitioned"),
             ({}, "magic", "default committer for s3://")]
    try:
        for conf, expected, why in cases:
            for key, value in conf.items():
                spark.conf.set(key, value)
            outcommit.spark.register(spark)
            dest = f"s3://spark/conf-{uuid.uuid4().hex[:8]}"
            written(df, moto, dest)
            for key in conf:
                spark.conf.unset(key)
            summary = success_of(dest, moto.config)
            assert summary.committer == expected
            assert why in summary.diagnostics["selection"]
    finally:
        for conf, _, _ in cases:
            for key in conf:
                spark.conf.unset(key)
        outcommit.spark.register(spark)


def test_unsafe_committer_fails_before_any_task(spark: Any, moto: Any, s3_dest: str) -> None:
    with pytest.raises(Exception, match=r"committer 'v1' is not safe on s3://"):
        written(events(spark, 100, 1), moto, s3_dest, committer="v1")
    store = open_store(s3_dest, moto.config)
    assert store.list_files(store.strip(s3_dest)) == []
    assert leftovers(s3_dest, moto.config) == []


def test_store_settings_from_spark_hadoop_keys(spark: Any, moto: Any, s3_dest: str) -> None:
    """Endpoint and credentials set the way a Spark user sets them for S3A; no write options."""
    import outcommit.spark

    try:
        for key, value in moto.hadoop_config.items():
            spark.conf.set(key, value)
        spark.conf.set("spark.hadoop.fs.s3a.committer.name", "magic")
        outcommit.spark.register(spark)
        df = events(spark, rows=300, partitions=2)
        df.write.format("outcommit").mode("append").save(s3_dest)
    finally:
        for key in [*moto.hadoop_config, "spark.hadoop.fs.s3a.committer.name"]:
            spark.conf.unset(key)
        outcommit.spark.register(spark)
    assert sorted(read_back(s3_dest, moto.config)) == sorted(as_strings(df.collect()))
    summary = success_of(s3_dest, moto.config)
    assert summary.committer == "magic"
    assert "fs.s3a.committer.name=magic" in summary.diagnostics["selection"]


@pytest.mark.parametrize(("options", "first_line"), [
    ({"partitonBy": "date"},
     r"outcommit\.errors\.OptionError: unknown write option 'partitonby' \(did you mean partitionBy\?\)"),
    ({"committer": "v1"}, r"outcommit\.errors\.UnsafeCommitterError: committer 'v1' is not safe on s3://"),
    ({"outcommit.s3.endpoint": "http://127.0.0.1:1"},
     r"outcommit\.errors\.StoreUnreachableError: cannot reach the S3 endpoint http://127\.0\.0\.1:1"),
    ({"path": "s3://no-such-bucket-here/t"},
     r"outcommit\.errors\.StoreNotFoundError: .*the bucket 'no-such-bucket-here' does not exist"),
], ids=["misspelled-option", "unsafe-committer", "wrong-endpoint", "missing-bucket"])
def test_the_first_line_of_the_spark_error_says_what_is_wrong(spark: Any, moto: Any, s3_dest: str,
                                                              options: dict[str, str],
                                                              first_line: str) -> None:
    import re

    options = {**moto.config, "path": s3_dest, **options}
    with pytest.raises(Exception) as caught:
        events(spark, 100, 1).write.format("outcommit").mode("append").options(**options).save()
    assert re.search(first_line, str(caught.value).splitlines()[0]), str(caught.value)[:2000]
    assert "Traceback" not in str(caught.value)
    assert leftovers(s3_dest, moto.config) == []


def test_a_task_side_error_names_itself_in_the_stage_failure(spark: Any, moto: Any, s3_dest: str) -> None:
    df = events(spark, 200, 2)
    written(df, moto, s3_dest, committer="partitioned", partitionBy="date")
    with pytest.raises(Exception) as caught:
        written(df, moto, s3_dest, committer="partitioned", partitionBy="date", conflictMode="fail")
    message = str(caught.value)
    # PySpark's own first line ("An exception was thrown from the Python worker:"), then ours.
    assert message.splitlines()[1].startswith(
        "outcommit.errors.DestinationExistsError: partition s3://"), message[:2000]
    assert "Traceback" not in message
