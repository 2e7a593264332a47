"""Write options and Spark config -> write plan (no Spark session needed)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import outcommit.spark
from generative import budget
from outcommit.errors import OptionError
from outcommit.spark.options import CONFLICT_KEY, build_plan, session_config


def plan(options: dict[str, str], overwrite: bool = False, conf: dict[str, str] | None = None):
    return build_plan({"path": "file:///tmp/x", **options}, overwrite, conf or {})


def test_options_arrive_lower_cased_and_still_work() -> None:
    p = plan({"partitionby": "date, country", "maxrowsperfile": "1000", "rowgroupsize": "500",
              "compression": "ZSTD", "format": "Parquet"})
    assert p.partition_by == ("date", "country")
    assert p.max_rows_per_file == 1000
    assert p.file_options == {"row_group_size": 500, "compression": "zstd"}
    assert p.fmt == "parquet"


@pytest.mark.parametrize(("options", "overwrite", "conf", "mode"), [
    ({}, False, {}, "append"),
    ({}, True, {}, "replace"),
    ({"conflictMode": "fail"}, True, {}, "fail"),
    ({}, False, {"spark.hadoop.fs.s3a.committer.staging.conflict-mode": "fail"}, "fail"),
    ({}, True, {"spark.outcommit.committer.conflict-mode": "fail"}, "replace"),
    ({"outcommit.committer.conflict-mode": "fail"}, True, {}, "fail"),
])
def test_conflict_mode_precedence(options: dict[str, str], overwrite: bool, conf: dict[str, str],
                                  mode: str) -> None:
    p = plan(options, overwrite, conf)
    assert p.conflict_mode == mode
    assert p.config[CONFLICT_KEY] == mode
    # Exactly one spelling of the key reaches the committer.
    assert [k for k in p.config if "conflict-mode" in k] == [CONFLICT_KEY]


def test_session_config_keeps_committer_and_store_keys_only() -> None:
    conf = {"spark.outcommit.committer.s3": "magic", "spark.hadoop.fs.s3a.endpoint": "http://x",
            "spark.hadoop.mapreduce.fileoutputcommitter.algorithm.version": "2",
            "spark.sql.sources.writeJobUUID": "job-1", "spark.master": "local[2]",
            "spark.hadoop.yarn.foo": "bar"}
    assert set(session_config(conf)) == set(conf) - {"spark.master", "spark.hadoop.yarn.foo"}


def test_write_options_win_over_session_config() -> None:
    p = plan({"outcommit.committer.file": "v1"}, conf={"spark.outcommit.committer.file": "v2"})
    from outcommit import Config

    assert Config(p.config).get_str("outcommit.committer.file") == "v1"


def test_job_id_from_spark_write_job_uuid() -> None:
    job = plan({}, conf={"spark.sql.sources.writeJobUUID": "abc-123"}).job_context()
    assert (job.job_id, job.job_id_source) == ("abc-123", "spark.sql.sources.writeJobUUID")
    assert plan({}).job_context().job_id != plan({}).job_context().job_id


@pytest.mark.parametrize(("options", "message"), [
    ({"path": ""}, "needs a destination"),
    ({"format": "orc"}, "format='orc'"),
    ({"conflictMode": "merge"}, "use fail, append or replace"),
    ({"partitionBy": "a,a"}, "names a column twice"),
    ({"maxRowsPerFile": "many"}, "not an integer"),
    ({"compression": "snapy"}, "unknown Parquet compression 'snapy': use one of none, "),
    ({"compression": "lzo"}, "'lzo' cannot be written with pyarrow"),
    ({"compression": "gzip", "format": "csv"}, "writes csv files uncompressed"),
])
def test_bad_options_get_clear_errors(options: dict[str, str], message: str) -> None:
    with pytest.raises(OptionError, match=message):
        plan(options)


def test_old_pyspark_gets_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import pyspark

    monkeypatch.setattr(pyspark, "__version__", "3.5.1")
    with pytest.raises(outcommit.spark.SparkVersionError, match=r"PySpark >= 4.0.*3.5.1"):
        outcommit.spark.register(object())


def test_a_misspelled_option_fails_with_what_was_meant() -> None:
    with pytest.raises(OptionError, match=r"'partitonby' \(did you mean partitionBy\?\).*takes path, format"):
        plan({"partitonBy": "date"})
    with pytest.raises(OptionError, match=r"'colour'"):
        plan({"colour": "blue"})
    # Configuration keys are options too, checked against what the plugins read.
    assert plan({"outcommit.committer.threads": "3"}).config["outcommit.committer.threads"] == "3"


@pytest.mark.parametrize(("given", "codec"), [
    ("none", "none"), ("UNCOMPRESSED", "none"), ("snappy", "snappy"), ("gzip", "gzip"),
    ("zstd", "zstd"), ("lz4", "lz4"), ("lz4_raw", "lz4_raw"), ("brotli", "brotli")])
def test_spark_compression_names_become_pyarrow_codecs(given: str, codec: str) -> None:
    """A bad codec failed in every task with a raw pyarrow traceback (user trial)."""
    assert plan({"compression": given}).file_options["compression"] == codec


# -- reads -----------------------------------------------------------------------------------------
def test_read_options_and_spark_sql_settings_make_the_read_plan() -> None:
    from outcommit.spark.options import build_read_plan

    p = build_read_plan({"path": "s3://b/t", "format": "CSV", "requiresuccess": "False",
                         "maxpartitionbytes": "1024", "fs.s3a.endpoint": "http://x"},
                        {"spark.outcommit.s3.region": "eu-west-1"},
                        {"spark.sql.session.timeZone": "Europe/Berlin",
                         "spark.sql.python.filterPushdown.enabled": "true"})
    assert (p.fmt, p.require_success, p.max_partition_bytes, p.time_zone, p.filter_pushdown) == (
        "csv", False, 1024, "Europe/Berlin", True)
    assert p.config == {"spark.outcommit.s3.region": "eu-west-1", "fs.s3a.endpoint": "http://x"}
    assert p.option_keys == ("outcommit.s3.endpoint",)
    defaults = build_read_plan({"path": "file:///t"})
    assert (defaults.fmt, defaults.require_success, defaults.filter_pushdown) == (None, True, False)


@pytest.mark.parametrize(("options", "message"), [
    ({}, "reads a destination"),
    ({"format": "orc"}, "format='orc': use one of parquet, csv, json"),
    ({"maxPartitionBytes": "0"}, "a number of bytes, at least 1"),
    ({"requireSuccess": "no"}, "use true or false"),
    ({"partitionBy": "date"},
     r"unknown read option 'partitionby' \(an option of writes, not reads: a read finds partition columns "
     r"in directory names\): the outcommit data source takes path, "),
])
def test_bad_read_options_get_clear_errors(options: dict[str, str], message: str) -> None:
    from outcommit.spark.options import build_read_plan

    with pytest.raises(OptionError, match=message):
        build_read_plan({"path": "file:///t", **options} if options else {})


# -- the session the tasks see ----------------------------------------------------------------------
def test_the_watched_keys_are_the_ones_users_set_for_outcommit() -> None:
    from outcommit.spark.options import watched_session_keys

    keys = set(watched_session_keys({"spark.outcommit.x.y": "1"}))
    assert {"spark.outcommit.committer.s3", "spark.outcommit.committer.file", "spark.outcommit.x.y",
            "spark.outcommit.committer.conflict-mode", "spark.sql.sources.writeJobUUID",
            "spark.hadoop.fs.s3a.endpoint", "spark.hadoop.mapreduce.fileoutputcommitter.algorithm.version",
            } <= keys
    assert all(k.startswith(("spark.outcommit.", "spark.hadoop.", "spark.sql.sources.")) for k in keys)


REGISTER = r"outcommit.spark.register\(spark\)"


def test_a_session_that_differs_from_the_snapshot_is_refused_with_the_fix() -> None:
    from outcommit.spark.options import SessionSnapshot

    session = {"spark.outcommit.committer.s3": "partitioned"}
    SessionSnapshot(dict(session), registered=True).check(session.get)
    with pytest.raises(OptionError, match=r"^the session sets spark.outcommit.committer.s3, which the "
                                          rf"outcommit data source reads only through {REGISTER}"):
        SessionSnapshot().check(session.get)
    with pytest.raises(OptionError, match=r"^the session's spark.outcommit.committer.s3 changed after "
                                          rf"{REGISTER} read the session config"):
        SessionSnapshot({"spark.outcommit.committer.s3": "magic"}, registered=True).check(session.get)
    with pytest.raises(OptionError, match=r"changed after"):   # unset after register
        SessionSnapshot({"spark.outcommit.committer.s3": "magic"}, registered=True).check({}.get)
    # A key the write's own options set wins over the session anyway: no conflict.
    SessionSnapshot().check(session.get, overridden=["outcommit.committer.s3"])
    hidden = {"spark.hadoop.fs.s3a.secret.key": "x"}
    connect = SessionSnapshot({}, registered=True, connect=True)
    with pytest.raises(OptionError, match=r"^Spark Connect does not show spark.hadoop.fs.s3a.secret.key"):
        connect.check(hidden.get)
    connect.check(hidden.get, overridden=["outcommit.s3.secret-key"])


SESSION_KEYS = ["spark.outcommit.s3.secret-key", "spark.hadoop.fs.s3a.access.key",
                "spark.outcommit.committer.s3", "spark.hadoop.fs.s3a.endpoint"]


@pytest.mark.generative
@budget(50)
@given(values=st.dictionaries(st.sampled_from(SESSION_KEYS),
                              st.text(min_size=12, max_size=40).filter(lambda v: v.strip() == v), min_size=1),
       registered=st.booleans(), connect=st.booleans())
def test_the_refusal_names_keys_never_their_values(values: dict[str, str], registered: bool,
                                                   connect: bool) -> None:
    """Whatever the session holds, the error names keys only (values may be credentials).
    50 examples, under a second."""
    from outcommit.spark.options import SessionSnapshot

    with pytest.raises(OptionError) as info:
        SessionSnapshot({}, registered, connect).check(values.get)
    for value in values.values():
        assert value not in str(info.value)
