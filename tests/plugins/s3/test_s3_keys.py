"""Typos under Hadoop's S3A names (issue 29, item 5): ``fs.s3a.committer.nmae=directory``
wrote with magic, ``fs.s3a.endpiont`` was ignored. The S3 plugin declares the families
(``fs.s3a.committer.*`` closed, ``fs.s3a.*`` open) and core checks them; every way keys
arrive is covered: Python ``config=``, Spark write options and session config (the data
source's plan, as its driver builds it), the CLI's ``--conf``. Nothing reaches a server."""

from __future__ import annotations

import warnings

import pytest

import outcommit
from outcommit import ConfigError
from outcommit.cli import main
from outcommit.factory import resolve_config
from outcommit.spark.options import build_plan

DEST = "s3://bucket/table"


def test_a_typo_in_the_committer_key_is_refused_not_the_default_committer() -> None:
    with pytest.raises(ConfigError, match=r"'fs.s3a.committer.nmae': did you mean fs.s3a.committer.name\? "
                                          r"\(not a key of Hadoop's S3A committers"):
        outcommit.create_committer(DEST, {"fs.s3a.committer.nmae": "directory"})


def test_spark_write_options_and_session_config_name_the_key_as_spelled() -> None:
    plan = build_plan({"path": DEST, "fs.s3a.committer.nmae": "directory"}, False)
    with pytest.raises(ConfigError, match=r"'fs.s3a.committer.nmae': did you mean fs.s3a.committer.name\?"):
        outcommit.create_committer(plan.destination, plan.config, plan.committer)
    plan = build_plan({"path": DEST}, False, {"spark.hadoop.fs.s3a.endpiont": "http://127.0.0.1:9"})
    with pytest.raises(ConfigError, match=r"'spark.hadoop.fs.s3a.endpiont': did you mean spark.hadoop."
                                          r"fs.s3a.endpoint\? \(not a key of Hadoop's S3A connector"):
        outcommit.create_committer(plan.destination, plan.config, plan.committer)


def test_a_misspelled_committer_value_says_which_was_meant() -> None:
    with pytest.raises(ConfigError, match=r"^spark.hadoop.fs.s3a.committer.name='magik': did you mean "
                                          r"magic\? Use file, directory, partitioned, magic"):
        outcommit.create_committer(DEST, {"spark.hadoop.fs.s3a.committer.name": "magik"})
    with pytest.raises(outcommit.UnknownCommitterError, match=r"did you mean magic\?"):
        outcommit.create_committer(DEST, {"outcommit.committer.s3": "magik"})


def test_hadoops_own_s3a_keys_pass() -> None:
    """Keys of Hadoop's S3A connector and committers that outcommit does not read, per-bucket
    settings, and keys of a newer Hadoop that are no near miss of a listed one."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert outcommit.keys.check(resolve_config({
            "spark.hadoop.fs.s3a.committer.magic.enabled": "true",
            "fs.s3a.committer.staging.tmp.path": "/tmp/x", "fs.s3a.fast.upload": "true",
            "fs.s3a.connection.request.timeout": "10s", "fs.s3a.bucket.b.endpoint": "http://x",
            "fs.s3a.aws.credentials.provider": "x", "fs.s3a.vectored.read.min.seek.size": "1",
            "fs.s3a.some.future.option": "1"})) == []


def test_hadoops_summary_report_directory_is_read() -> None:
    """It was a key of the family that outcommit ignored: now an alias, as the manifest's is."""
    config = resolve_config({"fs.s3a.committer.summary.report.directory": "file:///tmp/reports"})
    assert config.get_str("outcommit.summary-report-dir") == "file:///tmp/reports"


def test_cli_conf_typos_and_bare_keys(capsys) -> None:
    assert main(["capabilities", DEST, "--conf", "fs.s3a.endpiont=http://127.0.0.1:9"]) == 2
    assert "'fs.s3a.endpiont': did you mean fs.s3a.endpoint?" in capsys.readouterr().err
    assert main(["capabilities", DEST, "--conf", "endpoint=http://127.0.0.1:9"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1  # one line
    assert "'endpoint': did you mean fs.s3a.endpoint" in err and "outcommit.s3.endpoint" in err
