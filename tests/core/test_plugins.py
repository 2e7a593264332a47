"""Plugin discovery through real installed distributions, registries and the factory's errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import outcommit
from outcommit import capabilities as caps
from outcommit.capabilities import Capabilities
from outcommit.errors import PluginError, UnknownCommitterError, UnknownSchemeError, UnsafeCommitterError
from outcommit.plugins import DISABLE_AUTOLOAD_ENV, Registry, reset_registry
from outcommit.store import StoreSpec
from outcommit.stores.memory import MemoryStore

ROOT = Path(__file__).resolve().parents[2]
TESTPLUGIN = ROOT / "tests" / "plugins" / "outcommit-testplugin"


@pytest.fixture(scope="module")
def installed_testplugin(tmp_path_factory) -> Path:
    """pip-install the test plugin distribution into its own directory (not into the venv)."""
    target = tmp_path_factory.mktemp("site")
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                    "--no-build-isolation", "--target", str(target), str(TESTPLUGIN)],
                   check=True, capture_output=True, timeout=300)
    assert list(target.glob("outcommit_testplugin-*.dist-info/entry_points.txt"))
    return target


def run_with(site: Path | None, code: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k != DISABLE_AUTOLOAD_ENV}
    if site is not None:
        environ["PYTHONPATH"] = os.pathsep.join([str(site), environ.get("PYTHONPATH", "")])
    environ.update(env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=environ, timeout=120)


def test_installed_plugin_adds_its_scheme_without_touching_core(installed_testplugin: Path) -> None:
    code = ("import json, outcommit\n"
            "from outcommit.cli import main\n"
            "c = outcommit.create_committer('tstore://bucket/out')\n"
            "print(json.dumps({'committer': c.name, 'why': c.selection}))\n"
            "main(['plugins', '--json'])\n")
    result = run_with(installed_testplugin, code)
    assert result.returncode == 0, result.stderr
    first, rest = result.stdout.split("\n", 1)
    assert json.loads(first) == {"committer": "v2", "why": "default committer for tstore://"}
    plugins = {p["name"]: p for p in json.loads(rest)}
    assert plugins["testplugin"]["schemes"] == ["tstore"]
    assert plugins["testplugin"]["distribution"] == "outcommit-testplugin"
    assert plugins["testplugin"]["version"] == "0.0.1"
    # The broken entry point is reported with the plugin's name, and everything else still loads.
    assert 'Error importing plugin "broken"' in plugins["broken"]["error"]
    assert "outcommit_this_module_does_not_exist" in plugins["broken"]["error"]
    assert plugins["outcommit"]["schemes"] == ["file", "local", "memory", "memmp"]


def test_cli_lists_builtins_hdfs_and_the_broken_plugin(installed_testplugin: Path) -> None:
    result = run_with(installed_testplugin, "from outcommit.cli import main; main(['plugins'])")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "file (default v1)" in out and "memory (default v1)" in out
    assert "outcommit-hdfs" in out and "hdfs (default v1)" in out
    assert "tstore (default v2)" in out
    assert 'ERROR: Error importing plugin "broken"' in out


def test_autoload_can_be_disabled(installed_testplugin: Path) -> None:
    code = ("import outcommit\n"
            "try:\n    outcommit.create_committer('tstore://b/out')\n"
            "except outcommit.UnknownSchemeError as e:\n    print('unknown:', e)\n")
    result = run_with(installed_testplugin, code, **{DISABLE_AUTOLOAD_ENV: "1"})
    assert result.returncode == 0, result.stderr
    assert "unknown: no store registered for scheme 'tstore'" in result.stdout


def test_lookups_that_find_nothing_name_the_plugins_that_failed_to_load(
        installed_testplugin: Path) -> None:
    """A plugin that is installed but fails to import (its entry point ``broken``): the
    errors said "install a plugin that registers it", for a plugin that is installed."""
    code = ("import outcommit, outcommit.plugins\n"
            "def show(make):\n"
            "    try:\n        make()\n"
            "    except (outcommit.UnknownSchemeError, outcommit.UnknownCommitterError) as e:\n"
            "        print(type(e).__name__, e, sep='|', end='\\n--\\n')\n"
            "show(lambda: outcommit.create_committer('dirstore://vol/t'))\n"
            "show(lambda: outcommit.create_committer('tstore://vol/t', committer='nosuch'))\n"
            "outcommit.plugins.KNOWN_DISTRIBUTIONS['tbroken'] = 'outcommit-testplugin'\n"
            "show(lambda: outcommit.create_committer('tbroken://vol/t'))\n")
    result = run_with(installed_testplugin, code)
    assert result.returncode == 0, result.stderr
    scheme, committer, known = result.stdout.split("\n--\n")[:3]
    failure = ("\n  plugin 'broken' (outcommit-testplugin 0.0.1) is installed but failed to load: "
               "ModuleNotFoundError: No module named 'outcommit_this_module_does_not_exist'")
    assert scheme.startswith("UnknownSchemeError|no store registered for scheme 'dirstore': install "
                             "a plugin that registers it (entry-point group 'outcommit'), or fix "
                             "an installed one that failed to load (below).")
    assert committer.startswith("UnknownCommitterError|committer='nosuch' given by the caller: "
                                "no committer named 'nosuch'.")
    for message in (scheme, committer, known):
        assert message.endswith(f"Installed plugins that failed to load (one may register it):{failure}")
    # The scheme's own distribution is the broken one: not "pip install" what is installed.
    assert "its plugin, outcommit-testplugin, is installed but failed to load" in known
    assert "pip install" not in known


def test_unknown_scheme_names_the_distribution(fresh_registry: Registry) -> None:
    for scheme, dist in [("gs", "outcommit-gcs"), ("s3a", "outcommit-s3"), ("abfss", "outcommit-azure"),
                         ("hdfs", "outcommit-hdfs")]:
        # From this checkout's directory, never by name from PyPI (tests/core/test_install.py).
        plugin = dist.removeprefix("outcommit-")
        hint = rf"scheme '{scheme}': .*pip install '\S*/plugins/{plugin}'"
        with pytest.raises(UnknownSchemeError, match=hint):
            outcommit.create_committer(f"{scheme}://bucket/table")
    with pytest.raises(UnknownSchemeError, match=r"scheme 'nosuch'.*entry-point group 'outcommit'"):
        outcommit.create_committer("nosuch://x/y")


def test_unknown_committer_lists_registered_ones(tmp_path) -> None:
    with pytest.raises(UnknownCommitterError, match=r"no committer named 'v3'.*v1, v2"):
        outcommit.create_committer(str(tmp_path), committer="v3")


class _NoDirRenameStore(MemoryStore):
    capabilities = Capabilities.of(caps.RENAME_FILE_ATOMIC, caps.LISTING_CONSISTENT)


class _Plugin:
    def __init__(self, scheme: str, replace: bool = False) -> None:
        self.scheme, self.replace = scheme, replace

    @outcommit.hookimpl
    def register_stores(self, register) -> None:  # type: ignore[no-untyped-def]
        register.add(StoreSpec((self.scheme,), lambda url, config: _NoDirRenameStore(url, config), "v1",
                               _NoDirRenameStore.capabilities), replace=self.replace)


@pytest.fixture
def fresh_registry():
    registry = reset_registry(autoload=False)
    yield registry
    reset_registry()


def test_duplicate_scheme_is_refused_unless_replace(fresh_registry: Registry) -> None:
    """Added by hand: refused at once, and nothing else changes."""
    with pytest.raises(PluginError, match=r'"dup" registers scheme "file", already registered by '
                                          r'plugin "outcommit" \(outcommit [^)]*\); pass replace=True'):
        fresh_registry.add_plugin(_Plugin("file"), "dup")
    assert fresh_registry.store_spec("file").plugin == "outcommit"
    assert "dup" not in {p.name for p in fresh_registry.plugins()}
    registry = reset_registry(autoload=False)
    registry.add_plugin(_Plugin("file", replace=True), "dup")
    assert registry.store_spec("file").plugin == "dup"


def test_unsafe_pairing_is_refused_with_the_missing_capability(fresh_registry: Registry) -> None:
    fresh_registry.add_plugin(_Plugin("nodirs"), "nodirs")
    with pytest.raises(UnsafeCommitterError) as refused:
        outcommit.create_committer("nodirs://b/out")  # its default, v1, needs directory rename
    error = refused.value
    assert error.missing == [caps.RENAME_DIRECTORY_ATOMIC]
    assert "v2" in error.safe and "v1" not in error.safe
    assert "fs.rename.directory.atomic (atomic O(1) directory rename)" in str(error)
    assert "Safe committers for nodirs://: " in str(error) and "v2" in str(error)
    assert "outcommit.committer.allow-unsafe=true" in str(error)
    # The documented override allows it, loudly.
    with pytest.warns(UserWarning, match="unsafe committer 'v1'"):
        committer = outcommit.create_committer("nodirs://b/out",
                                               {"outcommit.committer.allow-unsafe": "true"})
    assert committer.name == "v1" and "UNSAFE" in committer.selection
    with pytest.warns(UserWarning):
        assert outcommit.create_committer("nodirs://b/out", allow_unsafe=True).name == "v1"
    assert outcommit.create_committer("nodirs://b/out", committer="v2").name == "v2"


def test_core_imports_no_plugin() -> None:
    """Every module of the shipped core imports, and none of them pulls in a plugin."""
    code = ("import importlib, importlib.util, pkgutil, sys, outcommit\n"
            "spark = importlib.util.find_spec('pyspark') is not None  # an optional extra\n"
            "for m in pkgutil.walk_packages(outcommit.__path__, 'outcommit.'):\n"
            "    if spark or not m.name.startswith('outcommit.spark.'):\n"
            "        importlib.import_module(m.name)\n"
            "import outcommit.factory as f\n"
            "f.create_committer('memory://core-only/out')\n"
            "print(sorted(n for n in sys.modules if n.startswith('outcommit_')))\n")
    result = run_with(None, code, **{DISABLE_AUTOLOAD_ENV: "1"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_hadoop_s3a_names_come_from_the_s3_plugin() -> None:
    """fs.s3a.* aliases and the fs.s3a.committer.name choice are the S3 plugin's hooks,
    applied by the composition layer (a Config alone is a plain value: core's aliases)."""
    code = ("import json, outcommit, outcommit.factory\n"
            "values = {'fs.s3a.committer.threads': '3', 'fs.s3a.committer.name': 'x'}\n"
            "print(json.dumps([dict(outcommit.factory.resolve_config(values)),\n"
            "                  dict(outcommit.Config(values))]))\n")
    plain = {"fs.s3a.committer.threads": "3", "fs.s3a.committer.name": "x"}
    core_only = run_with(None, code, **{DISABLE_AUTOLOAD_ENV: "1"})
    assert json.loads(core_only.stdout) == [plain, plain]
    with_plugins = run_with(None, code)
    assert json.loads(with_plugins.stdout) == [{"outcommit.committer.threads": "3",
                                                "outcommit.s3a.committer.name": "x"}, plain]
    assert outcommit.plugins.get_registry().committer_selectors()[0].plugin == "s3"


def test_a_config_read_while_plugins_load_reads_as_one_read_after(installed_testplugin: Path) -> None:
    """A Config asked the registry for aliases on its first read: one first read while the
    plugins loaded (here, in an installed plugin's hook) got none, not even core's
    ``mapreduce.*`` names, and kept that for good (the 7 threads read back as None)."""
    code = ("import json\n"
            "from outcommit.plugins import get_registry\n"
            "get_registry().stores()  # loads every installed plugin, the reader among them\n"
            "from outcommit_testplugin.reader import READ\n"
            "print(json.dumps([READ['during'], READ['config'].get_str('outcommit.committer.threads')]))\n")
    result = run_with(installed_testplugin, code)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == ["7", "7"]


def test_normalising_a_url_loads_no_plugin() -> None:
    """It loaded every installed plugin (to know which ``name:`` prefixes are schemes): a
    plain path cost every plugin's import. The schemes of plugins known by name, and any
    ``name:/``, are refused without '//' all the same."""
    code = ("import json, sys\n"
            "from outcommit import ConfigError\n"
            "from outcommit.factory import normalise_url\n"
            "import outcommit.plugins as plugins\n"
            "refused = []\n"
            "for url in ('s3:/bucket/x', 's3a:bucket/x', 'hdfs:/user/x', 'nosuch:/x'):\n"
            "    try:\n        normalise_url(url)\n"
            "    except ConfigError:\n        refused.append(url)\n"
            "print(json.dumps([normalise_url('/tmp/run-2026-01-01T10:00'), refused,\n"
            "                  sorted(n for n in sys.modules if n.startswith('outcommit_')),\n"
            "                  plugins._registry is not None and plugins._registry._loaded]))\n")
    result = run_with(None, code)  # autoload on: every plugin of this environment is installed
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == ["file:///tmp/run-2026-01-01T10:00",
                                         ["s3:/bucket/x", "s3a:bucket/x", "hdfs:/user/x", "nosuch:/x"],
                                         [], False]


class _Registering:
    """A plugin whose hooks register through the registrar as ``register(...)`` (the earlier
    form), and (``wrong``) pass something that is not a spec."""

    def __init__(self, wrong: bool = False) -> None:
        self.wrong = wrong

    @outcommit.hookimpl
    def register_stores(self, register) -> None:  # type: ignore[no-untyped-def]
        spec = "tstore2" if self.wrong else StoreSpec(
            ("oldstyle",), lambda url, config: MemoryStore(url, config), "v1", MemoryStore.capabilities)
        register(spec)

    @outcommit.hookimpl
    def register_config_keys(self, register) -> None:  # type: ignore[no-untyped-def]
        register("outcommit.oldstyle.", "keys of the plugin", secret=False)


def test_calling_the_registrar_still_registers_with_a_deprecation_warning(
        fresh_registry: Registry) -> None:
    """Plugins written for the earlier ``register(...)`` callables keep working for a release."""
    with pytest.warns(DeprecationWarning) as warned:
        fresh_registry.add_plugin(_Registering(), "old")
    assert sorted({str(w.message) for w in warned}) == [
        f'plugin "old" calls the {hook} registrar as register(...): call register.add(...) instead '
        "(register(...) goes in the next release)"
        for hook in ("register_config_keys", "register_stores")]
    assert fresh_registry.store_spec("oldstyle").plugin == "old"
    assert "outcommit.oldstyle." in fresh_registry.config_keys()


def test_a_registration_of_the_wrong_type_names_the_plugin_and_the_hook(fresh_registry: Registry) -> None:
    """Refused when registered, not when a lookup first meets it."""
    with pytest.warns(DeprecationWarning), pytest.raises(
            PluginError, match=r'plugin "wrong", hook register_stores: a store must be '
                               r"outcommit\.store\.StoreSpec, not str \('tstore2'\)"):
        fresh_registry.add_plugin(_Registering(wrong=True), "wrong")
    assert "wrong" not in {p.name for p in fresh_registry.plugins()}
