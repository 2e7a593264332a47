"""Write options and Spark config -> write plan (no Spark session needed)."""

from __future__ import annotations

import pytest

import outcommit.spark
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
