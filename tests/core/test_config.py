"""Configuration: prefixes, Hadoop aliases, selection order, unknown keys, job ids."""

from __future__ import annotations

import warnings

import pytest

import outcommit
from outcommit import Config, ConfigError, JobContext
from outcommit.config import redact
from outcommit.factory import resolve_config


def test_spark_prefixes_are_stripped_and_hadoop_aliases_mapped() -> None:
    values = {
        "spark.outcommit.committer.file": "v2",
        "spark.hadoop.fs.s3a.committer.name": "magic",
        "spark.hadoop.mapreduce.fileoutputcommitter.marksuccessfuljobs": "false",
        "fs.s3a.committer.staging.conflict-mode": "replace",
    }
    config = resolve_config(values)  # what stores and committers get: the plugins' aliases too
    assert config["outcommit.committer.file"] == "v2"
    assert config["outcommit.s3a.committer.name"] == "magic"
    assert config.get_bool("outcommit.success.enabled", True) is False
    assert config["outcommit.committer.conflict-mode"] == "replace"
    # A Config alone is a plain value: core's own aliases, and the table it is given.
    plain = Config(values)
    assert plain.get_bool("outcommit.success.enabled", True) is False
    assert plain["fs.s3a.committer.name"] == "magic" and "outcommit.s3a.committer.name" not in plain
    given = Config(values, {"fs.s3a.committer.name": "outcommit.s3a.committer.name"})
    assert given["outcommit.s3a.committer.name"] == "magic"
    assert plain.with_aliases(given.aliases) == given


def test_explicit_outcommit_key_wins_over_its_hadoop_alias() -> None:
    config = Config({"outcommit.committer.threads": "4", "fs.s3a.committer.threads": "64"})
    assert config.get_int("outcommit.committer.threads", 8) == 4


def test_bad_values_give_clear_errors() -> None:
    config = Config({"outcommit.committer.threads": "many", "outcommit.success.enabled": "perhaps",
                     "outcommit.committer.conflict-mode": "merge"})
    with pytest.raises(ConfigError, match=r"outcommit\.committer\.threads=.many. is not an integer"):
        config.get_int("outcommit.committer.threads", 8)
    with pytest.raises(ConfigError, match="is not a boolean"):
        config.get_bool("outcommit.success.enabled", True)
    with pytest.raises(ConfigError, match=r"conflict-mode=.merge. is not one of fail, append, replace"):
        outcommit.create_committer("memory://cfg/out", {"outcommit.committer.conflict-mode": "merge"})


def test_selection_order(tmp_path) -> None:
    dest = str(tmp_path / "out")
    assert outcommit.create_committer(dest).name == "v1"
    assert outcommit.create_committer(
        dest, {"mapreduce.fileoutputcommitter.algorithm.version": "2"}).name == "v2"
    assert outcommit.create_committer(dest, {"outcommit.committer": "v2"}).name == "v2"
    per_scheme = outcommit.create_committer(
        dest, {"spark.outcommit.committer.file": "v2",
               "mapreduce.fileoutputcommitter.algorithm.version": "1"})
    # The reason names the key as spelled.
    assert per_scheme.name == "v2" and per_scheme.selection == "spark.outcommit.committer.file=v2"
    explicit = outcommit.create_committer(dest, {"outcommit.committer.file": "v2"}, committer="v1")
    assert explicit.name == "v1" and "given by the caller" in explicit.selection
    with pytest.raises(ConfigError, match=r"algorithm\.version=.3.: use 1 or 2"):
        outcommit.create_committer(dest, {"mapreduce.fileoutputcommitter.algorithm.version": "3"})


def test_unknown_outcommit_keys_are_reported_not_ignored(tmp_path) -> None:
    with pytest.raises(ConfigError, match=r"'outcommit\.comitter\.file': did you mean "
                                          r"outcommit\.committer\.file\b"):
        outcommit.create_committer(str(tmp_path), {"outcommit.comitter.file": "v2"})
    with pytest.raises(ConfigError, match=r"valid keys under outcommit\.s3\.\*: .*outcommit\.s3\.endpoint"):
        outcommit.create_committer(str(tmp_path), {"outcommit.s3.zzz": "1"})
    with pytest.warns(UserWarning, match=r"unknown configuration key 'outcommit.comitter.file'"):
        outcommit.create_committer(str(tmp_path), {"outcommit.comitter.file": "v2",
                                                   "outcommit.config.strict": "false"})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # known keys and foreign keys are not reported
        outcommit.create_committer(str(tmp_path), {"outcommit.committer.threads": "2",
                                                   "outcommit.committer.memory": "v1",
                                                   "spark.executor.memory": "2g"})


def test_job_ids_are_uuids_unless_given() -> None:
    ids = {JobContext("memory://x").job_id for _ in range(1000)}
    assert len(ids) == 1000
    job = JobContext("memory://x")
    assert job.job_id_source == "generated" and len(job.job_id) == 36
    spark = JobContext("memory://x", config={"spark.sql.sources.writeJobUUID": "abc-123"})
    assert (spark.job_id, spark.job_id_source) == ("abc-123", "spark.sql.sources.writeJobUUID")
    given = JobContext("memory://x", job_id="job_42")
    assert (given.job_id, given.job_id_source) == ("job_42", "caller")
    task = given.task_attempt(3, 1)
    assert task.task_id == "task_job_42_000003"
    assert task.attempt_id == "attempt_job_42_0000_000003_1"
    assert given.next_attempt().task_attempt(3, 1).attempt_id == "attempt_job_42_0001_000003_1"
    assert JobContext.from_dict(given.to_dict()) == given


@pytest.mark.parametrize("bad", ["../escape", "a/b", "", " spaced", "x" * 200])
def test_job_ids_that_could_escape_a_directory_are_refused(bad: str) -> None:
    if bad == "":
        assert JobContext("memory://x", job_id=bad).job_id_source == "generated"
        return
    with pytest.raises(ConfigError, match="invalid job id"):
        JobContext("memory://x", job_id=bad)


def test_secrets_are_redacted_for_logging() -> None:
    shown = redact({"outcommit.s3.secret-key": "hunter2", "fs.s3a.access.key": "AKIA",
                    "outcommit.azure.connection-string": "AccountKey=x", "outcommit.committer": "v1"})
    assert "hunter2" not in str(shown) and "AKIA" not in str(shown) and "AccountKey" not in str(shown)
    assert shown["outcommit.committer"] == "v1"
    assert "hunter2" not in repr(Config({"spark.hadoop.fs.s3a.secret.key": "hunter2"}))


def test_scheme_aliases_share_the_per_scheme_committer_key() -> None:
    """spark.outcommit.committer.s3 applies to s3a:// writes (Hadoop users write s3a)."""
    config = {"spark.outcommit.committer.s3": "partitioned", "outcommit.s3.endpoint": "http://x"}
    chosen = outcommit.create_committer("s3a://bucket/table", config)
    assert chosen.name == "partitioned"
    assert chosen.selection == "spark.outcommit.committer.s3=partitioned (s3a:// is an alias of s3://)"
    own = outcommit.create_committer("s3a://bucket/table",
                                     {**config, "outcommit.committer.s3a": "directory"})
    assert (own.name, own.selection) == ("directory", "outcommit.committer.s3a=directory")
    gs = outcommit.create_committer("gcs://bucket/table", {"outcommit.committer.gs": "v2"})
    assert gs.name == "v2" and "alias of gs://" in gs.selection


@pytest.mark.parametrize(("key", "value", "error"), [
    ("outcommit.success.enabled", "ture", ConfigError),
    ("outcommit.retry.attempts", "0", ConfigError),
    ("outcommit.progress.interval-seconds", "soon", ConfigError),
    ("outcommit.progress.bar", "maybe", ConfigError),
    ("outcommit.summary-report-dir", "ftp://reports/x", outcommit.UnknownSchemeError),
    ("outcommit.config.strict", "flase", ConfigError),  # was read only when a key was unknown
    ("outcommit.committer.unique-filenames", "nope", ConfigError),  # read by S3 staging only
])
def test_settings_first_used_at_job_commit_fail_before_any_task_runs(key, value, error, tmp_path) -> None:
    """They were read only at job commit: every task ran first, and under v2 the tasks'
    files stayed visible in the destination, without a _SUCCESS."""
    import pyarrow as pa

    from outcommit.engine.local import LocalDriver

    dest = tmp_path / "out"
    with pytest.raises(error, match=key.rsplit(".", 1)[-1] if error is ConfigError else "ftp"):
        LocalDriver(f"file://{dest}", committer="v2", config={key: value}).run(
            [pa.table({"a": [1]}), pa.table({"a": [2]})])
    assert not dest.exists()


def test_an_abort_never_needs_the_summary_report_directorys_plugin(tmp_path) -> None:
    """Only job setup checks that scheme (review: a check in the constructor made aborts
    and executors need a plugin only the driver's report uses)."""
    dest = f"file://{tmp_path}/out"
    committer = outcommit.create_committer(dest, {"outcommit.summary-report-dir": "ftp://reports/x"}, "v1")
    job = JobContext(dest)
    committer.abort_job(job)
    committer.cleanup_job(job)
    with pytest.raises(outcommit.UnknownSchemeError, match="ftp"):
        committer.setup_job(job)


def test_a_committer_made_directly_says_how_to_get_a_summary_report_store(tmp_path) -> None:
    """Committers reach a store other than their destination's only through the installed
    components the factory gives them (the protocol module used to import the factory and
    the registry for it, up the layers). One made directly has none: job setup says so,
    before anything is written, rather than the report being lost at job commit."""
    from outcommit.committers.fileoutput import FileOutputCommitterV1
    from outcommit.factory import INSTALLED

    dest, reports = f"file://{tmp_path}/out", f"file://{tmp_path}/reports"
    config = Config({"outcommit.summary-report-dir": reports})
    direct = FileOutputCommitterV1(dest, outcommit.open_store(dest), config)
    with pytest.raises(ConfigError, match=r"a summary report directory needs the installed stores, "
                                          r"which .* was made without: make it with "
                                          r"outcommit\.create_committer"):
        direct.setup_job(JobContext(dest))
    assert list(tmp_path.iterdir()) == []
    direct.components = INSTALLED
    job = JobContext(dest)
    direct.setup_job(job)
    direct.commit_job(job, [])
    assert [p.name for p in (tmp_path / "reports").iterdir()] == [f"summary-{job.job_id}-0.json"]
