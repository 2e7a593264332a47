"""``spark.read.format("outcommit").load(url)``: exactly the committed files, through outcommit's
stores, with Spark's partition columns; pruning with the query's filters."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from spark_helpers import DATES, as_strings, events, visible_files

import outcommit.spark
from outcommit import open_store

pytestmark = pytest.mark.spark


def read(spark: Any, url: str, **options: str) -> Any:
    return spark.read.format("outcommit").options(**options).load(url)


def written(df: Any, url: str, **options: str) -> Any:
    df.write.format("outcommit").mode("append").options(**options).save(url)
    return df


def first_line(error: BaseException) -> str:
    """The line of a Spark error that names outcommit's own error."""
    return next((line for line in str(error).splitlines() if "outcommit.errors." in line), str(error))


@pytest.fixture
def pushdown(spark: Any) -> Iterator[Any]:
    """The session with Python filter pushdown on, registered after it was set."""
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    outcommit.spark.register(spark)
    try:
        yield spark
    finally:
        spark.conf.unset("spark.sql.python.filterPushdown.enabled")
        outcommit.spark.register(spark)


def test_reads_back_what_was_written_with_sparks_own_columns(spark: Any, local_dest: str) -> None:
    df = written(events(spark, rows=3000, partitions=4), local_dest, partitionBy="date")
    frame = read(spark, local_dest)
    assert frame.schema == spark.read.parquet(local_dest).schema   # date: a date, as Spark infers it
    assert [f.dataType.simpleString() for f in frame.schema.fields] == ["bigint", "bigint", "double", "date"]
    assert sorted(as_strings(frame.collect())) == sorted(as_strings(
        df.selectExpr("id", "user", "amount", "cast(date as date) as date").collect()))


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_csv_and_json_are_read_by_their_extension(spark: Any, local_dest: str, fmt: str) -> None:
    df = written(events(spark, rows=600, partitions=2), local_dest, format=fmt, partitionBy="date")
    frame = read(spark, local_dest)
    assert {f.name: f.dataType.simpleString() for f in frame.schema.fields} == {
        "id": "bigint", "user": "bigint", "amount": "double", "date": "date"}
    assert sorted(as_strings(frame.collect())) == sorted(as_strings(
        df.selectExpr("id", "user", "amount", "cast(date as date) as date").collect()))


def test_a_given_schema_types_the_partition_column(spark: Any, local_dest: str) -> None:
    written(events(spark, rows=300, partitions=2), local_dest, partitionBy="date")
    frame = spark.read.format("outcommit").schema("id long, date string, missing int").load(local_dest)
    got = frame.collect()
    assert len(got) == 300 and {r.date for r in got} == set(DATES) and {r.missing for r in got} == {None}
    with pytest.raises(Exception) as info:
        spark.read.format("outcommit").schema("id long, date int").load(local_dest).count()
    assert "outcommit.errors.OptionError: partition directory 'date=2024-05-01': column 'date' is int, " \
           "but '2024-05-01' is not an integer" in first_line(info.value)


def test_an_empty_job_reads_as_no_rows_with_its_columns(spark: Any, local_dest: str) -> None:
    written(events(spark, rows=100, partitions=2).where("id < 0"), local_dest)
    frame = read(spark, local_dest)
    assert frame.columns == ["id", "date", "user", "amount"] and frame.count() == 0


def test_a_destination_nothing_committed_to_is_refused_with_the_option_to_read_it(
        spark: Any, tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    pq.write_table(pa.table({"id": [1, 2]}), plain / "data.parquet")
    with pytest.raises(Exception) as info:
        read(spark, f"file://{plain}").count()
    assert first_line(info.value).endswith(
        f"outcommit.errors.NotCommittedError: file://{plain} has no _SUCCESS report and no streaming "
        "batch log: no outcommit job or query has committed there (a failed write leaves neither); "
        ".option('requireSuccess', 'false') reads whatever a reader following Spark's rule sees there")
    assert read(spark, f"file://{plain}", requireSuccess="false").count() == 2


def test_a_misspelled_read_option_names_the_one_meant(spark: Any, local_dest: str) -> None:
    with pytest.raises(Exception) as info:
        read(spark, local_dest, requireSucess="false").count()
    assert "outcommit.errors.OptionError: unknown read option 'requiresucess' (did you mean " \
           "requireSuccess?)" in first_line(info.value)


def test_partition_pruning_opens_only_the_matching_files(pushdown: Any, local_dest: str) -> None:
    """One input partition per file (maxPartitionBytes=1): the count of input partitions is
    the count of files a read opens."""
    written(events(pushdown, rows=3000, partitions=4), local_dest, partitionBy="date")
    per_date = {d: sum(1 for f in visible_files(local_dest) if f.startswith(f"date={d}/")) for d in DATES}
    frame = read(pushdown, local_dest, maxPartitionBytes="1")
    assert frame.rdd.getNumPartitions() == sum(per_date.values()) == 12
    one = frame.where(f"date = '{DATES[0]}'")
    assert one.rdd.getNumPartitions() == per_date[DATES[0]] == 4
    assert one.count() == 1000
    later = frame.where(f"date > '{DATES[0]}' and amount >= 0")
    assert later.rdd.getNumPartitions() == 8 and later.count() == 2000
    assert frame.where("date is null").rdd.getNumPartitions() == 1   # Spark's one empty partition
    assert frame.where("date is null").count() == 0
    # A filter on a data column prunes nothing and loses nothing.
    assert frame.where("id < 10").rdd.getNumPartitions() == 12 and frame.where("id < 10").count() == 10


def test_without_filter_pushdown_every_file_is_read_and_the_rows_are_the_same(
        spark: Any, local_dest: str) -> None:
    written(events(spark, rows=3000, partitions=4), local_dest, partitionBy="date")
    one = read(spark, local_dest, maxPartitionBytes="1").where(f"date = '{DATES[0]}'")
    assert one.rdd.getNumPartitions() == 12 and one.count() == 1000


def test_a_streaming_destination_reads_its_committed_batches_only(spark: Any, tmp_path: Path) -> None:
    """An interrupted batch's files sit in the directory until the query restarts: the
    log-aware reader skips them, and so does Spark's own reader now (it read them: 301 rows),
    through the _spark_metadata log the sink keeps."""
    source = tmp_path / "in"
    for n in range(3):
        source.mkdir(exist_ok=True)
        pq.write_table(pa.table({"id": list(range(n * 100, n * 100 + 100)), "part": [n % 2] * 100}),
                       source / f"in-{n}.parquet")
    dest = f"file://{tmp_path}/events"
    stream = spark.readStream.schema("id long, part long").option("maxFilesPerTrigger", 1).parquet(
        str(source))
    query = (stream.writeStream.format("outcommit").option("checkpointLocation", str(tmp_path / "checkpoint"))
             .option("partitionBy", "part").trigger(availableNow=True).start(dest))
    query.awaitTermination()
    stray = tmp_path / "events" / "part=0" / f"part-00000-000-{uuid.uuid4()}-b3-r1-a0.parquet"
    pq.write_table(pa.table({"id": [999_999]}), stray)   # an interrupted batch 3's published file
    frame = read(spark, dest)
    assert frame.count() == 300 and frame.where("id = 999999").count() == 0
    assert sorted(r.id for r in frame.collect()) == list(range(300))
    assert spark.read.parquet(dest.removeprefix("file://")).count() == 300


def test_small_files_share_an_input_partition_large_ones_do_not() -> None:
    from outcommit.spark.reader import DataFile, group_files

    files = [DataFile(f"file:///t/f{n}", size) for n, size in enumerate([100, 200 * 2**20, 300, 50 * 2**20])]
    groups = group_files(files, 128 * 2**20)
    assert [[f.url for f in g] for g in groups] == [["file:///t/f1"], ["file:///t/f3", "file:///t/f2",
                                                                       "file:///t/f0"]]
    assert len(group_files(files, 1)) == 4
    assert group_files([], 1) == []


# -- S3: what Spark itself cannot read -----------------------------------------------------------------
@pytest.fixture(scope="module")
def moto(moto_server: Any) -> Any:
    moto_server.create_bucket("spark-read")
    return dataclasses.replace(moto_server, max_attempts=2)


@pytest.mark.s3
def test_s3_output_reads_back_without_hadoops_s3_connector(pushdown: Any, moto: Any) -> None:
    """pip's PySpark has no S3 filesystem; the data source reads through outcommit's store.
    Pruning is counted at the wire: a proxy in front of the moto server sees every request
    of every Python worker, and none names a file of another partition."""
    from outcommit_devtools.faultproxy import FaultProxy, Rule, delay

    dest = f"s3://spark-read/t-{uuid.uuid4().hex[:8]}"
    df = written(events(pushdown, rows=3000, partitions=4), dest, committer="magic", partitionBy="date",
                 **moto.config)
    with pytest.raises(Exception, match='No FileSystem for scheme "s3"'):
        pushdown.read.parquet(dest).count()
    assert sorted(as_strings(read(pushdown, dest, **moto.config).collect())) == sorted(as_strings(
        df.selectExpr("id", "user", "amount", "cast(date as date) as date").collect()))
    with FaultProxy(moto.endpoint_url) as proxy:
        others = proxy.add(Rule("other dates", delay(0), path="|".join(f"date(=|%3D){d}/" for d in DATES[1:]),
                                times=-1))
        wanted = proxy.add(Rule("first date", delay(0), path=f"date(=|%3D){DATES[0]}/", times=-1))
        through = {**moto.config, "outcommit.s3.endpoint": proxy.url}
        assert read(pushdown, dest, **through).where(f"date = '{DATES[0]}'").count() == 1000
        assert (wanted.matched > 0, others.matched) == (True, 0)
        assert read(pushdown, dest, **through).count() == 3000
        assert others.matched > 0   # the rule sees those files when they are read


# -- without register(spark), and after the session changed --------------------------------------------
@pytest.fixture
def unregistered(spark: Any) -> Iterator[Any]:
    """A new session of the cluster: Spark's own registration only (no register call),
    and none of the test session's outcommit keys."""
    session = spark.newSession()
    session.conf.unset("spark.outcommit.committer.file")
    yield session


def test_spark_finds_the_data_source_by_itself(unregistered: Any, local_dest: str) -> None:
    written(events(unregistered, rows=300, partitions=2), local_dest, partitionBy="date")
    assert read(unregistered, local_dest).count() == 300


def stream_once(session: Any, tmp_path: Path, name: str) -> Any:
    """A streaming query of one micro-batch (two rows) into ``file://<tmp>/<name>``."""
    source = tmp_path / f"{name}-in"
    source.mkdir()
    pq.write_table(pa.table({"id": [1, 2]}), source / "in-0.parquet")
    return (session.readStream.schema("id long").parquet(str(source)).writeStream.format("outcommit")
            .option("checkpointLocation", str(tmp_path / f"{name}-checkpoint")).trigger(availableNow=True)
            .start(f"file://{tmp_path}/{name}"))


def test_a_streaming_query_runs_into_the_sink_spark_found_by_itself(unregistered: Any,
                                                                    tmp_path: Path) -> None:
    """No register(spark): the query stopped at its first batch asking for it. The sink's
    tasks now compare the session with the driver's config as a batch write's do, so a
    session without outcommit keys just runs; Spark reads the batch back itself."""
    stream_once(unregistered, tmp_path, "events").awaitTermination()
    assert sorted(r["id"] for r in unregistered.read.parquet(f"file://{tmp_path}/events").collect()) == [1, 2]


def test_session_config_a_streaming_query_did_not_read_stops_its_tasks(unregistered: Any,
                                                                       tmp_path: Path) -> None:
    """The session names a committer the sink found by Spark cannot see: its tasks stop before
    recording or writing anything, naming the key and the fix."""
    unregistered.conf.set("spark.outcommit.committer.file", "v2")
    query = stream_once(unregistered, tmp_path, "events")
    with pytest.raises(Exception) as info:
        query.awaitTermination()
    assert ("outcommit.errors.OptionError: the session sets spark.outcommit.committer.file, which "
            "the outcommit data source reads only through outcommit.spark.register(spark)") \
        in first_line(info.value)
    assert not (tmp_path / "events").exists() or visible_files(f"file://{tmp_path}/events") == []
    assert not (tmp_path / "events" / "_outcommit_log" / "_jobs").exists()


def test_session_config_the_driver_did_not_read_stops_the_tasks(unregistered: Any, local_dest: str,
                                                                spark: Any) -> None:
    """Spark's own registration cannot see the session's config; the tasks can, and stop
    before they write or read, naming the keys and the fix."""
    written(events(spark, rows=300, partitions=2), local_dest)
    unregistered.conf.set("spark.outcommit.committer.file", "v2")
    expected = ("outcommit.errors.OptionError: the session sets spark.outcommit.committer.file, which "
                "the outcommit data source reads only through outcommit.spark.register(spark)")
    with pytest.raises(Exception) as info:
        read(unregistered, local_dest).count()
    assert expected in first_line(info.value)
    other = f"{local_dest}-unwritten"
    with pytest.raises(Exception) as info:
        written(events(unregistered, rows=300, partitions=2), other)
    assert expected in first_line(info.value)
    assert visible_files(other) == []
    outcommit.spark.register(unregistered)
    written(events(unregistered, rows=300, partitions=2), other)
    store = open_store(other)
    from outcommit import load_success

    assert load_success(store, store.join(store.strip(other), "_SUCCESS")).committer == "v2"


def test_a_session_key_changed_after_register_stops_the_tasks(spark: Any, local_dest: str) -> None:
    try:
        spark.conf.set("spark.outcommit.committer.file", "v2")     # register() read v1
        with pytest.raises(Exception) as info:
            written(events(spark, rows=100, partitions=1), local_dest)
        assert ("outcommit.errors.OptionError: the session's spark.outcommit.committer.file changed after "
                "outcommit.spark.register(spark) read the session config") in first_line(info.value)
        assert visible_files(local_dest) == []
    finally:
        spark.conf.set("spark.outcommit.committer.file", "v1")
