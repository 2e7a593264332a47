"""Typos in configuration keys and committer names get a one-line error with the key
meant (issue 29, item 5): ``outcommit.`` keys, Hadoop's key families that outcommit reads
(declared by plugins through ``register_config_families``, so core names none of them),
bare keys that end a real key's name, and the CLI's ``--conf``."""

from __future__ import annotations

import warnings

import pytest

import outcommit
from outcommit import ConfigError, UnknownCommitterError, hookimpl
from outcommit.cli import main
from outcommit.factory import resolve_config
from outcommit.keys import check
from outcommit.plugins import reset_registry


def test_a_misspelled_committer_name_gets_the_name_meant(tmp_path) -> None:
    with pytest.raises(UnknownCommitterError, match=r"committer='manifst' given by the caller: no "
                                                    r"committer named 'manifst': did you mean manifest\?"):
        outcommit.create_committer(str(tmp_path), committer="manifst")
    # Chosen by a key: the error names the key as the user spelled it.
    with pytest.raises(UnknownCommitterError, match=r"^spark\.outcommit\.committer\.file=manfest: no "
                                                    r"committer named 'manfest': did you mean manifest\?"):
        outcommit.create_committer(str(tmp_path), {"spark.outcommit.committer.file": "manfest"})
    with pytest.raises(UnknownCommitterError, match=r"no committer named 'zzz'\. Registered committers"):
        outcommit.create_committer(str(tmp_path), committer="zzz")


@pytest.mark.parametrize(("spelled", "meant"), [
    ("mapreduce.fileoutputcommitter.algorithm.versoin", "mapreduce.fileoutputcommitter.algorithm.version"),
    ("spark.hadoop.mapreduce.fileoutputcommitter.marksucessfuljobs",
     "spark.hadoop.mapreduce.fileoutputcommitter.marksuccessfuljobs"),
    ("mapreduce.manifest.committer.validate.outptu", "mapreduce.manifest.committer.validate.output"),
])
def test_a_typo_in_a_hadoop_family_core_reads_is_refused(tmp_path, spelled: str, meant: str) -> None:
    """Hadoop ignores ``mapreduce.fileoutputcommitter.algorithm.versoin``: so did outcommit,
    and the job ran with v1. The error names the key as spelled, prefix and all."""
    with pytest.raises(ConfigError, match=rf"unknown configuration key '{spelled}': did you mean "
                                          rf"{meant}\? \(not a key of Hadoop's"):
        outcommit.create_committer(str(tmp_path), {spelled: "2"})


def test_hadoops_own_keys_outcommit_does_not_read_pass(tmp_path) -> None:
    """A Spark session's Hadoop configuration is also Hadoop's committers': their keys pass."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        outcommit.create_committer(str(tmp_path), {
            "spark.hadoop.mapreduce.fileoutputcommitter.cleanup.skipped": "true",
            "mapreduce.manifest.committer.writer.queue.capacity": "32",
            "mapreduce.outputcommitter.factory.scheme.s3a": "x",   # no family: not ours to judge
            "spark.sql.sources.writeJobUUID": "x"})


def test_a_closed_family_refuses_any_other_key(tmp_path) -> None:
    with pytest.raises(ConfigError, match=r"'mapreduce.fileoutputcommitter.zzz' \(not a key of Hadoop's "
                                          r"FileOutputCommitter; outcommit reads mapreduce\."):
        outcommit.create_committer(str(tmp_path), {"mapreduce.fileoutputcommitter.zzz": "1"})


def test_not_strict_warns_instead(tmp_path) -> None:
    with pytest.warns(UserWarning, match=r"'mapreduce.fileoutputcommitter.algorithm.versoin': did you mean"):
        committer = outcommit.create_committer(str(tmp_path), {
            "mapreduce.fileoutputcommitter.algorithm.versoin": "2", "outcommit.config.strict": "false"})
    assert committer.name == "v1"


def test_a_bare_key_that_ends_a_real_key_is_refused(tmp_path) -> None:
    with pytest.raises(ConfigError, match=r"unknown configuration key 'threads': did you mean "
                                          r"outcommit\.committer\.threads"):
        outcommit.create_committer(str(tmp_path), {"threads": "4"})
    with warnings.catch_warnings():  # any other key of a caller's passes in code
        warnings.simplefilter("error")
        assert check(resolve_config({"my.own.setting": "1"})) == []


class _FamilyPlugin:
    """A third-party plugin with a Hadoop family of its own: core checks it, naming no plugin."""

    @hookimpl
    def register_config_keys(self, register) -> None:  # type: ignore[no-untyped-def]
        register.add("outcommit.dirstore.root", "where the store's files are")

    @hookimpl
    def register_config_aliases(self, register) -> None:  # type: ignore[no-untyped-def]
        register.add("fs.dirstore.root", "outcommit.dirstore.root")

    @hookimpl
    def register_config_families(self, register) -> None:  # type: ignore[no-untyped-def]
        from outcommit import KeyFamily  # new with the hook: the rest of the file runs without

        register.add(KeyFamily("fs.dirstore.", frozenset({"fs.dirstore.impl"}), closed=False,
                               label="the dirstore connector"))


def test_a_plugins_family_is_checked_by_core() -> None:
    registry = reset_registry(autoload=False)
    try:
        registry.add_plugin(_FamilyPlugin(), "dirstore")
        with pytest.raises(ConfigError, match=r"'spark.hadoop.fs.dirstore.rot': did you mean "
                                              r"spark.hadoop.fs.dirstore.root\? \(not a key of the dirstore"):
            check(resolve_config({"spark.hadoop.fs.dirstore.rot": "/x"}))
        # Open: a key that is no near miss is the connector's own.
        assert check(resolve_config({"fs.dirstore.impl": "x", "fs.dirstore.cache.size": "9"})) == []
        assert "fs.dirstore." in registry.config_families()
        assert registry.config_families()["fs.dirstore."].plugin == "dirstore"
    finally:
        reset_registry()


def test_a_key_family_prefix_ends_with_a_dot() -> None:
    from outcommit import KeyFamily

    class Bad:
        @hookimpl
        def register_config_families(self, register) -> None:  # type: ignore[no-untyped-def]
            register.add(KeyFamily("fs.bad"))

    registry = reset_registry(autoload=False)
    try:
        with pytest.raises(outcommit.PluginError, match=r"ends with '\.'"):
            registry.add_plugin(Bad(), "bad")
    finally:
        reset_registry()


def test_cli_conf_keys_must_be_read_by_something(tmp_path, capsys) -> None:
    """Only outcommit reads --conf: a key nothing reads is refused, whatever its name."""
    assert main(["capabilities", str(tmp_path), "--conf",
                 "mapreduce.fileoutputcommitter.algorithm.versoin=2"]) == 2
    assert "did you mean mapreduce.fileoutputcommitter.algorithm.version?" in capsys.readouterr().err
    assert main(["capabilities", str(tmp_path), "--conf", "threads=4"]) == 2
    assert "'threads': did you mean outcommit.committer.threads" in capsys.readouterr().err
    assert main(["capabilities", str(tmp_path), "--conf", "colour=blue"]) == 2
    assert "unknown configuration key 'colour' (outcommit's keys start with outcommit." \
        in capsys.readouterr().err
    assert main(["capabilities", str(tmp_path), "--conf", "outcommit.committer.threads=4"]) == 0
