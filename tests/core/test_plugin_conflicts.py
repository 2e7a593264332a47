"""Plugins that register a name another plugin registered (issue 27 #7).

An installed plugin registering ``s3`` without ``replace=True`` made every lookup fail,
``file://`` writes and ``outcommit plugins`` included, blaming a different plugin from run
to run; one registering it with ``replace=True`` won in some processes and raised in
others: the registrations were taken in the order of the plugin manager's set. The
checks with installed distributions run each in fresh processes (pip-installed into their
own directories); the order itself is checked in-process with plugins whose hashes
decide a set's order, and as a property of the ordering over drawn distribution sets.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import outcommit
from generative import budget
from outcommit.contributions import Contribution, by_distribution, merge
from outcommit.errors import PluginError
from outcommit.plugins import DISABLE_AUTOLOAD_ENV, reset_registry
from outcommit.store import StoreSpec
from outcommit.stores.memory import MEMORY_CAPABILITIES, MemoryStore

PLUGIN_MODULE = '''\
"""A plugin of the conflict tests: registers {registrations}."""

from outcommit import hookimpl
from outcommit.store import StoreSpec
from outcommit.stores.memory import MEMORY_CAPABILITIES, MemoryStore


class ConflictStore(MemoryStore):
    def strip(self, url):
        return "/{package}/" + url.split("://", 1)[1].strip("/")


@hookimpl
def register_stores(register):
    for schemes, replace in {registrations!r}:
        register.add(StoreSpec(tuple(schemes), lambda url, config: ConflictStore(url, config), "v1",
                               MEMORY_CAPABILITIES, "{dist}'s store"), replace=replace)
'''


def install(root: Path, dist: str, entry_point: str,
            registrations: list[tuple[list[str], bool]]) -> Path:
    """Build distribution ``dist`` (one entry point) and pip-install it into its own directory."""
    package = dist.replace("-", "_")
    project = root / dist
    (project / "src" / package).mkdir(parents=True)
    (project / "src" / package / "__init__.py").write_text("")
    (project / "src" / package / "plugin.py").write_text(PLUGIN_MODULE.format(
        registrations=registrations, package=package, dist=dist))
    (project / "pyproject.toml").write_text(textwrap.dedent(f"""\
        [build-system]
        requires = ["setuptools>=61"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "{dist}"
        version = "0.1.0"
        dependencies = []

        [project.entry-points.outcommit]
        {entry_point} = "{package}.plugin"

        [tool.setuptools.packages.find]
        where = ["src"]
        """))
    site = root / f"site-{dist}"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                    "--no-build-isolation", "--target", str(site), str(project)],
                   check=True, capture_output=True, timeout=300)
    return site


@pytest.fixture(scope="module")
def sites(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("conflicts")
    return {
        # s3 again, without replace=True, and a scheme of its own.
        "clash": install(root, "outcommit-s3-clash", "s3clash", [(["s3"], False),
                                                                 (["clashstore"], False)]),
        # The documented override.
        "override": install(root, "outcommit-s3-override", "s3override", [(["s3", "s3a"], True)]),
        # A second override of s3, whose distribution name sorts after the first's.
        "override-two": install(root, "outcommit-s3-override-two", "s3override2", [(["s3"], True)]),
    }


CHECK = """\
import json, tempfile, outcommit
from outcommit.cli import main
from outcommit.plugins import get_registry
registry = get_registry()
committer = outcommit.create_committer(tempfile.mkdtemp())
stores = {s: type(outcommit.open_store(s + '://bucket/t')).__module__ for s in ('s3', 's3a')}
try:
    outcommit.open_store('clashstore://b/t')
    clash = None
except outcommit.UnknownSchemeError as e:
    clash = str(e)
print(json.dumps({'file': committer.name, 'stores': stores, 'clashstore': clash,
                  'magic': registry.committer_spec('magic').plugin}))
main(['plugins', '--json'])
"""


def run(sites: list[Path], seed: int = 0) -> subprocess.Popen[str]:
    """A fresh process running CHECK with these distributions installed (hash seed ``seed``)."""
    environ = {k: v for k, v in os.environ.items() if k != DISABLE_AUTOLOAD_ENV}
    environ["PYTHONPATH"] = os.pathsep.join([*map(str, sites), environ.get("PYTHONPATH", "")])
    environ["PYTHONHASHSEED"] = str(seed)
    return subprocess.Popen([sys.executable, "-c", CHECK], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=environ)


def outcome(process: subprocess.Popen[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(what CHECK saw, ``outcommit plugins --json`` by plugin name)."""
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err[-3000:]
    first, rest = out.split("\n", 1)
    return json.loads(first), {p["name"]: p for p in json.loads(rest)}


def test_a_plugin_registering_s3_again_is_skipped_and_breaks_nothing(sites) -> None:
    """Everything else loads: file:// writes, the S3 plugin (its store and committers),
    'outcommit plugins'; the conflicting plugin is named with its distribution and the one
    it conflicts with, in every process alike, and a lookup of its own scheme says why."""
    results = [outcome(p) for p in [run([sites["clash"]], seed) for seed in range(3)]]
    assert all(result == results[0] for result in results)  # the same blame in every process
    seen, plugins = results[0]
    assert seen["file"] == "v1" and seen["magic"] == "s3"
    assert seen["stores"] == {"s3": "outcommit_s3.store", "s3a": "outcommit_s3.store"}
    error = ('Error registering plugin "s3clash": plugin "s3clash" (outcommit-s3-clash 0.1.0) '
             'registers scheme "s3", already registered by plugin "s3" (outcommit-s3 ')
    assert plugins["s3clash"]["error"].startswith(error)
    assert plugins["s3clash"]["error"].endswith("; pass replace=True to replace it")
    assert plugins["s3clash"]["schemes"] == [] and plugins["s3"]["schemes"] == ["s3", "s3a"]
    assert plugins["s3"]["error"] is None
    assert ("plugin 's3clash' (outcommit-s3-clash 0.1.0) is installed but was skipped: plugin "
            '"s3clash"') in seen["clashstore"]


def test_an_override_with_replace_wins_in_every_process(sites) -> None:
    """Issue: it won in 7 of 12 fresh processes and raised PluginError in the others."""
    processes = [run([sites["override"]], seed) for seed in range(6)]  # at once: 2 cores
    for seen, plugins in map(outcome, processes):
        assert seen["stores"] == {"s3": "outcommit_s3_override.plugin",
                                  "s3a": "outcommit_s3_override.plugin"}
        assert seen["magic"] == "s3"  # the rest of the S3 plugin is still there
        assert plugins["s3override"]["schemes"] == ["s3", "s3a"] and plugins["s3"]["schemes"] == []
        assert plugins["s3override"]["error"] is None and plugins["s3"]["error"] is None


def test_of_two_overrides_the_first_distribution_wins_and_the_other_is_named(sites) -> None:
    seen, plugins = outcome(run([sites["override-two"], sites["override"]]))
    assert seen["stores"]["s3"] == "outcommit_s3_override.plugin"
    assert plugins["s3override2"]["error"] == (
        'Error registering plugin "s3override2": plugin "s3override2" (outcommit-s3-override-two '
        '0.1.0) replaces scheme "s3", which plugin "s3override" (outcommit-s3-override 0.1.0) '
        "replaces already: only one plugin may replace it")


# -- the order, in-process ----------------------------------------------------------------
class _Hashed:
    """A plugin whose hash is chosen: it decides where a set puts it."""

    def __init__(self, scheme: str, replace: bool, hash_value: int) -> None:
        self.scheme, self.replace, self.hash_value = scheme, replace, hash_value

    def __hash__(self) -> int:
        return self.hash_value

    def __eq__(self, other: object) -> bool:
        return self is other

    @outcommit.hookimpl
    def register_stores(self, register) -> None:  # type: ignore[no-untyped-def]
        register.add(StoreSpec((self.scheme,), lambda url, config: MemoryStore(url, config), "v1",
                               MEMORY_CAPABILITIES, f"replace={self.replace}"), replace=self.replace)


@pytest.mark.parametrize("hashes", [(1, 2), (2, 1), (3, 4), (4, 3), (5, 6), (6, 5)])
@pytest.mark.parametrize("override_first", [True, False])
def test_a_replacement_wins_whatever_order_a_set_gives(hashes: tuple[int, int],
                                                       override_first: bool) -> None:
    """With the registrations taken in a set's order, the plain registration came second
    for some hashes and was refused, or (added by hand first) overrode the replacement."""
    original = _Hashed("tx", replace=False, hash_value=hashes[0])
    override = _Hashed("tx", replace=True, hash_value=hashes[1])
    registry = reset_registry(autoload=False)
    try:
        for plugin, name in ([(override, "override"), (original, "original")] if override_first
                             else [(original, "original"), (override, "override")]):
            registry.add_plugin(plugin, name)
        assert registry.store_spec("tx").plugin == "override"
        assert registry.store_spec("tx").description == "replace=True"
    finally:
        reset_registry()


def test_a_plugin_whose_hook_raises_is_refused_and_breaks_nothing(tmp_path) -> None:
    class Raising:
        @outcommit.hookimpl
        def register_stores(self, register) -> None:  # type: ignore[no-untyped-def]
            raise RuntimeError("boom")

    registry = reset_registry(autoload=False)
    try:
        with pytest.raises(PluginError, match=r'plugin "raising": a hook of plugin "raising" '
                                              r"raised RuntimeError: boom"):
            registry.add_plugin(Raising(), "raising")
        assert outcommit.create_committer(str(tmp_path)).name == "v1"
    finally:
        reset_registry()


_DISTS = st.sampled_from(["outcommit-a", "outcommit-s3", "Outcommit_B", "outcommit-zz", "x.dist"])
_REGISTRATION = st.tuples(st.sampled_from(["s3", "gs", "tx"]), st.booleans())


@pytest.mark.generative
@budget(100)
@given(plugins=st.dictionaries(st.tuples(_DISTS, st.sampled_from(["p", "q"])),
                               st.lists(_REGISTRATION, min_size=1, max_size=2), min_size=1,
                               max_size=6),
       data=st.data())
def test_registries_do_not_depend_on_the_order_plugins_are_found_in(plugins, data) -> None:
    """Any set of distributions, found in any order: one outcome; a plain registration of
    a name another plugin registered is skipped, naming both; a replacement wins over
    every plain registration. (CI: 100 examples, about a second.)"""
    def outcome(found: list[tuple[str | None, str]]) -> tuple[dict[str, str], dict[str, str]]:
        contributions = []
        for dist, entry in by_distribution(found):
            contribution = Contribution(f"{dist}:{entry}")
            for scheme, replace in plugins[(dist, entry)]:
                spec = StoreSpec((scheme,), lambda url, config: MemoryStore(url, config), "v1",
                                 MEMORY_CAPABILITIES, plugin=contribution.name)
                contribution.stores.append((spec, replace))
            contributions.append(contribution)
        merged = merge(contributions)
        return {s: spec.plugin for s, spec in merged.stores.items()}, merged.skipped

    found = list(plugins)
    stores, skipped = outcome(found)
    assert outcome(data.draw(st.permutations(found))) == (stores, skipped)
    for (dist, entry), registrations in plugins.items():
        name = f"{dist}:{entry}"
        if name in skipped:
            assert f'plugin "{name}"' in skipped[name] and skipped[name].count('plugin "') >= 1
            continue
        for scheme, replace in registrations:
            if replace:
                assert stores[scheme] == name  # an accepted replacement always wins
            else:
                assert scheme in stores


def test_installed_plugins_are_taken_by_distribution_name() -> None:
    found = [("outcommit-testplugin", "testplugin"), ("outcommit-s3", "s3"), (None, "loose"),
             ("Outcommit_Azure", "azure"), ("outcommit-testplugin", "broken")]
    assert by_distribution(found) == [("Outcommit_Azure", "azure"), ("outcommit-s3", "s3"),
                                      ("outcommit-testplugin", "broken"),
                                      ("outcommit-testplugin", "testplugin"), (None, "loose")]
    assert by_distribution(list(reversed(found))) == by_distribution(found)

