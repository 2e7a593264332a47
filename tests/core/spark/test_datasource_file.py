"""The outcommit data source on file:// with the rename committers (v1, v2)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from spark_helpers import (
    DATES,
    as_strings,
    events,
    leftovers,
    read_back,
    row_digest,
    visible_files,
    wait_for_stragglers,
)

from outcommit import load_success, open_store

pytestmark = pytest.mark.spark

def success_of(url: str) -> Any:
    store = open_store(url)
    return load_success(store, store.join(store.strip(url), "_SUCCESS"))


def test_v1_exactly_once_with_a_failed_first_attempt(spark: Any, local_dest: str) -> None:
    df = events(spark)
    (df.write.format("outcommit").mode("append").option("committer", "v1")
       .option("partitionBy", "date").option("_failTaskOnce", "1").save(local_dest))

    assert sorted(read_back(local_dest)) == sorted(as_strings(df.collect()))
    assert row_digest(read_back(local_dest)) == row_digest(as_strings(df.collect()))
    files = visible_files(local_dest)
    # Hive layout, partition column not stored in the files, names unique per job and attempt.
    assert {f.split("/")[0] for f in files} == {f"date={d}" for d in DATES}
    assert all(f.split("/")[1].startswith("part-") and f.endswith(".parquet") for f in files)
    import pyarrow.parquet as pq

    assert "date" not in pq.read_schema(local_dest.removeprefix("file://") + "/" + files[0]).names
    # Task 1's retry (attempt 1) committed, its failed attempt 0 left nothing.
    assert any("-a1." in f for f in files) and not any("part-00001" in f and "-a0." in f for f in files)
    assert leftovers(local_dest) == []
    summary = success_of(local_dest)
    assert summary.committer == "v1" and summary.success
    assert summary.metrics["rows.written"] == 3000
    assert summary.metrics["files.written"] == len(files)
    assert summary.metrics["bytes.written"] > 0
    assert summary.metrics["spark.task.retries"] == 1


def test_failed_job_leaves_nothing_visible(spark: Any, local_dest: str) -> None:
    from pyspark.sql import functions as F

    # The last partition fails on every attempt; the others commit their tasks first.
    df = events(spark, rows=2000, partitions=4).withColumn(
        "checked", F.assert_true(F.col("id") != 1999, "poisoned row"))
    with pytest.raises(Exception, match="poisoned row"):
        df.write.format("outcommit").mode("append").option("committer", "v1").save(local_dest)
    wait_for_stragglers(spark)
    assert visible_files(local_dest) == []
    assert leftovers(local_dest) == []
    store = open_store(local_dest)
    assert not store.exists(store.join(store.strip(local_dest), "_SUCCESS"))


def test_overwrite_replaces_and_append_adds(spark: Any, local_dest: str) -> None:
    first, second = events(spark, rows=500, partitions=2), events(spark, 300, 2, first_id=10_000)
    first.write.format("outcommit").mode("append").save(local_dest)
    second.write.format("outcommit").mode("append").save(local_dest)
    assert sorted(read_back(local_dest)) == sorted(as_strings(first.collect() + second.collect()))

    second.write.format("outcommit").mode("overwrite").save(local_dest)
    assert sorted(read_back(local_dest)) == sorted(as_strings(second.collect()))
    assert leftovers(local_dest) == []


def test_conflict_mode_fail_refuses_existing_data_before_tasks_run(spark: Any, local_dest: str) -> None:
    df = events(spark, rows=100, partitions=1)
    df.write.format("outcommit").mode("append").save(local_dest)
    before = visible_files(local_dest)
    with pytest.raises(Exception, match="conflict mode is 'fail'"):
        df.write.format("outcommit").mode("append").option("conflictMode", "fail").save(local_dest)
    assert visible_files(local_dest) == before
    assert leftovers(local_dest) == []


def test_unknown_committer_fails_before_any_task(spark: Any, local_dest: str) -> None:
    with pytest.raises(Exception, match="nosuch") as info:
        events(spark, 100, 1).write.format("outcommit").mode("append") \
            .option("committer", "nosuch").save(local_dest)
    assert "UnknownCommitterError" in str(info.value) or "unknown committer" in str(info.value).lower()
    assert not open_store(local_dest).exists(open_store(local_dest).strip(local_dest))


def test_spark_config_selects_the_committer_per_scheme(spark: Any, tmp_path: Any) -> None:
    import outcommit.spark

    df = events(spark, rows=200, partitions=2)
    cases = [
        ({"spark.outcommit.committer.file": "v2"}, {}, "v2", "outcommit.committer.file=v2"),
        ({"spark.hadoop.mapreduce.fileoutputcommitter.algorithm.version": "2"}, {}, "v2",
         "mapreduce.fileoutputcommitter.algorithm.version=2"),
        ({"spark.outcommit.committer.file": "v2"}, {"committer": "v1"}, "v1", "given by the caller"),
    ]
    try:
        for n, (conf, options, expected, why) in enumerate(cases):
            for key, value in conf.items():
                spark.conf.set(key, value)
            outcommit.spark.register(spark)
            dest = f"file://{tmp_path}/conf-{n}"
            df.write.format("outcommit").mode("append").options(**options).save(dest)
            for key in conf:
                spark.conf.unset(key)
            summary = success_of(dest)
            assert (summary.committer, n) == (expected, n)
            assert why in summary.diagnostics["selection"]
    finally:
        for conf, _, _, _ in cases:
            for key in conf:
                spark.conf.unset(key)
        outcommit.spark.register(spark)


def test_unset_of_a_key_set_on_the_builder_takes_effect(spark: Any, tmp_path: Any) -> None:
    import outcommit.spark

    key = "spark.outcommit.committer.file"
    assert spark.sparkContext.getConf().get(key) == "v1"        # set on the builder
    df = events(spark, rows=100, partitions=1)
    try:
        spark.conf.set(key, "v1")
        outcommit.spark.register(spark)
        df.write.format("outcommit").mode("append").save(f"file://{tmp_path}/builder-key")
        assert success_of(f"file://{tmp_path}/builder-key").diagnostics["selection"] == \
            "spark.outcommit.committer.file=v1"  # named as spelled (issue 29, 5)
        spark.conf.unset(key)
        outcommit.spark.register(spark)
        df.write.format("outcommit").mode("append").save(f"file://{tmp_path}/unset")
        assert success_of(f"file://{tmp_path}/unset").diagnostics["selection"] == \
            "default committer for file://"
    finally:
        spark.conf.set(key, "v1")
        outcommit.spark.register(spark)


def test_csv_and_json_formats(spark: Any, tmp_path: Any) -> None:
    df = events(spark, rows=300, partitions=2).drop("amount")
    csv_dest, json_dest = f"file://{tmp_path}/csv", f"file://{tmp_path}/json"
    df.write.format("outcommit").mode("append").option("format", "csv") \
        .option("partitionBy", "date").save(csv_dest)
    df.write.format("outcommit").mode("append").option("format", "json").save(json_dest)
    assert all(f.endswith(".csv") for f in visible_files(csv_dest))
    assert sorted(read_back(csv_dest, fmt="csv")) == sorted(as_strings(df.collect()))
    rows = []
    for rel in visible_files(json_dest):
        with open(json_dest.removeprefix("file://") + "/" + rel) as f:
            rows += [json.loads(line) for line in f]
    assert sorted((r["id"], r["date"], r["user"]) for r in rows) == \
        sorted((r.id, r.date, r.user) for r in df.collect())


def test_spark_reads_back_the_partition_values_written(spark: Any, tmp_path: Any) -> None:
    """Partition values were escaped as UTF-8 bytes (``city=Z%C3%BCrich``), which Spark
    reads back one character per ``%XX``: ``ZÃ¼rich``. They are now escaped as Spark
    escapes them, so Spark, pyarrow and Spark's own writer agree."""
    import pyarrow.dataset as ds

    cities = ["Zürich", "München", "東京", "a b", "x/y", "k=v", "50%", "t:1", "..", "{[*?]}^#'\""]
    df = spark.createDataFrame([(i, c) for i, c in enumerate(cities)], "id long, city string")
    ours, theirs = f"file://{tmp_path}/ours", f"file://{tmp_path}/spark"
    df.write.format("outcommit").mode("append").option("partitionBy", "city").save(ours)
    df.write.mode("append").partitionBy("city").parquet(theirs)

    read = spark.read.parquet(ours).collect()
    assert sorted((r.id, r.city) for r in read) == list(enumerate(cities))
    by_pyarrow = ds.dataset(str(tmp_path / "ours"), format="parquet", partitioning="hive").to_table()
    assert sorted(zip(by_pyarrow["id"].to_pylist(), by_pyarrow["city"].to_pylist(), strict=True)) == \
        list(enumerate(cities))
    # The same directory names as Spark's own writer ('..' aside: Spark writes it as is).
    def directories(root: Any) -> set[str]:
        return {p.name for p in root.iterdir() if p.name.startswith("city=")}
    assert directories(tmp_path / "ours") - {"city=%2E%2E"} == \
        directories(tmp_path / "spark") - {"city=.."}


def test_partition_directories_are_named_as_spark_names_them(spark: Any, tmp_path: Any) -> None:
    """Booleans were named True/False, timestamps 2026-11-01T10:30:00+00:00, doubles nan
    and 10000000000.0: not what Spark's writer names (true, 2026-11-01 10:30:00, NaN,
    1.0E10), so Spark read them back as other values or types, and a table written by both
    had two partitions for one value."""
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    df = spark.sql("""SELECT * FROM VALUES
        (1, TIMESTAMP'2026-11-01 10:30:00', true, CAST(1.5 AS DOUBLE), CAST(0.1 AS FLOAT),
         DATE'2026-11-01', CAST(1.50 AS DECIMAL(5, 2))),
        (2, TIMESTAMP'2026-11-02 00:00:00.25', false, CAST('NaN' AS DOUBLE), CAST(3.25 AS FLOAT),
         DATE'2026-11-02', CAST(-2 AS DECIMAL(5, 2))),
        (3, TIMESTAMP'2026-11-02 00:00:00.25', false, CAST(1e10 AS DOUBLE), CAST(1e10 AS FLOAT),
         DATE'2026-11-02', CAST(0 AS DECIMAL(5, 2))),
        (4, TIMESTAMP'2026-11-02 00:00:00.25', false, CAST(0.0001 AS DOUBLE), CAST(-0.5 AS FLOAT),
         DATE'2026-11-02', CAST(0 AS DECIMAL(5, 2)))
        AS t(id, ts, b, d, f, day, amount)""")
    for column in ("ts", "b", "d", "f", "day", "amount"):
        ours, theirs = tmp_path / f"ours-{column}", tmp_path / f"spark-{column}"
        df.write.format("outcommit").mode("append").option("partitionBy", column).save(f"file://{ours}")
        df.write.mode("append").partitionBy(column).parquet(str(theirs))
        assert {p.name for p in ours.iterdir() if "=" in p.name} == \
            {p.name for p in theirs.iterdir() if "=" in p.name}, column
        read_ours, read_theirs = spark.read.parquet(str(ours)), spark.read.parquet(str(theirs))
        assert dict(read_ours.dtypes)[column] == dict(read_theirs.dtypes)[column], column
        assert sorted(map(str, read_ours.select("id", column).collect())) == \
            sorted(map(str, read_theirs.select("id", column).collect())), column


def _parquet_files(url: str) -> list[str]:
    root = url.removeprefix("file://")
    return [f"{root}/{f}" for f in visible_files(url) if f.endswith(".parquet")]


def test_max_bytes_per_file_and_row_group_size_hold_within_spark_batches(spark: Any,
                                                                         tmp_path: Any) -> None:
    """Spark hands over batches of 10,000 rows: maxBytesPerFile=1000000 gave 10.4 MB files and
    rowGroupSize=1000 10,000-row groups (user trial)."""
    import os

    import pyarrow.parquet as pq
    from pyspark.sql import functions as F

    df = spark.range(0, 20000, numPartitions=1).select(
        "id", F.expr("repeat(sha2(cast(id AS string), 256), 16)").alias("s"))
    by_bytes, by_groups = f"file://{tmp_path}/mb", f"file://{tmp_path}/rg"
    df.write.format("outcommit").mode("overwrite").option("compression", "none") \
        .option("maxBytesPerFile", "1000000").save(by_bytes)
    sizes = [os.path.getsize(f) for f in _parquet_files(by_bytes)]
    assert len(sizes) >= 18 and max(sizes) < 1_100_000, sizes
    df.write.format("outcommit").mode("overwrite").option("rowGroupSize", "1000").save(by_groups)
    meta = pq.ParquetFile(_parquet_files(by_groups)[0]).metadata
    assert {meta.row_group(i).num_rows for i in range(meta.num_row_groups)} == {1000}
    assert spark.read.parquet(by_bytes).count() == spark.read.parquet(by_groups).count() == 20000


@pytest.mark.parametrize(("option", "value", "message"), [
    ("compression", "snapy", "unknown Parquet compression 'snapy'"),
    ("partitionBy", "st", r"cannot use struct<a:bigint> for partition column 'st'"),
    ("partitionBy", "arr", r"cannot use array<bigint> for partition column 'arr'"),
    ("partitionBy", "m", r"cannot use map<string,bigint> for partition column 'm'"),
    ("partitionBy", "bin", r"cannot use binary for partition column 'bin'"),
])
def test_bad_codec_or_partition_column_type_fails_on_the_driver(
        spark: Any, local_dest: str, option: str, value: str, message: str) -> None:
    """They passed the driver and failed in every task with a raw pyarrow traceback."""
    df = spark.sql("SELECT id, named_struct('a', id) AS st, array(id) AS arr, "
                   "map('k', id) AS m, cast('x' AS binary) AS bin FROM range(10)")
    with pytest.raises(Exception, match=message) as info:
        df.write.format("outcommit").mode("append").option(option, value).save(local_dest)
    assert "OptionError" in str(info.value)
    # Failed in writer(), before job setup: nothing was created.
    assert not open_store(local_dest).exists(open_store(local_dest).strip(local_dest))


@pytest.mark.parametrize("partitions", [1, 3])
def test_an_empty_dataframe_leaves_a_readable_dataset(spark: Any, local_dest: str,
                                                      partitions: int) -> None:
    """As Spark's own writer (task 0 writes a file with the schema when it got no rows);
    outcommit wrote only _SUCCESS, so spark.read.parquet failed with UNABLE_TO_INFER_SCHEMA."""
    import outcommit.read

    df = spark.range(0, 10, numPartitions=partitions).selectExpr(
        "id", "cast(id AS string) AS s", "timestamp'2026-11-01 10:30:00' AS ts").where("id < 0")
    df.write.format("outcommit").mode("overwrite").save(local_dest)
    back = spark.read.parquet(local_dest)
    assert back.count() == 0 and back.columns == ["id", "s", "ts"]
    assert [(f.name, f.dataType) for f in back.schema] == [(f.name, f.dataType) for f in df.schema]
    assert len(_parquet_files(local_dest)) == 1
    table = outcommit.read.dataset(local_dest).to_table()
    assert table.num_rows == 0 and table.column_names == ["id", "s", "ts"]
    # Rows in task 1 only: task 0 adds its schema-only file, as Spark's writer does.
    some = spark.range(0, 10, numPartitions=2).selectExpr(
        "id", "cast(id AS string) AS s", "timestamp'2026-11-01 10:30:00' AS ts").where("id >= 5")
    some.write.format("outcommit").mode("overwrite").save(local_dest)
    assert sorted(r.id for r in spark.read.parquet(local_dest).collect()) == [5, 6, 7, 8, 9]
