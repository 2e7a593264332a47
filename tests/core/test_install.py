"""Install hints never name a distribution to fetch from PyPI: outcommit's are not there,
and anyone could register those names. They name this checkout's directory, or a wheelhouse."""

from __future__ import annotations

import importlib.metadata as md
import re
from pathlib import Path

import pytest

import outcommit
import outcommit.install as install
from outcommit import UnknownSchemeError
from outcommit.install import install_command, source_directory
from outcommit.plugins import KNOWN_DISTRIBUTIONS, reset_registry

if __import__("sys").version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[2]
DISTRIBUTIONS = sorted({"outcommit", "outcommit-devtools", *KNOWN_DISTRIBUTIONS.values()})
#: "pip install" and then a distribution by its bare name: what PyPI would resolve.
FROM_PYPI = re.compile(r"pip install (?:-\S+ )*'?(outcommit(?:-[a-z0-9]+)?)\b(?!/)")


@pytest.fixture
def without_plugins():
    yield reset_registry(autoload=False)
    reset_registry()


@pytest.mark.parametrize("distribution", DISTRIBUTIONS)
def test_every_distribution_has_the_directory_the_hints_name(distribution: str) -> None:
    project = tomllib.loads((ROOT / source_directory(distribution) / "pyproject.toml").read_text())
    assert project["project"]["name"] == distribution


def test_an_unknown_scheme_names_the_plugin_directory_of_this_checkout(without_plugins) -> None:
    assert install.checkout() == ROOT           # the development install is an editable one
    for scheme, dist in sorted(KNOWN_DISTRIBUTIONS.items()):
        with pytest.raises(UnknownSchemeError) as raised:
            outcommit.create_committer(f"{scheme}://bucket/table")
        message = str(raised.value)
        assert f"install the plugin for it: pip install '{ROOT / source_directory(dist)}'" in message
        assert not FROM_PYPI.search(message), message


def test_without_a_checkout_the_hint_names_a_wheelhouse_and_says_why(without_plugins, monkeypatch) -> None:
    monkeypatch.setattr(install, "checkout", lambda: None)      # installed from a wheelhouse
    with pytest.raises(UnknownSchemeError) as raised:
        outcommit.create_committer("gs://bucket/table")
    message = str(raised.value)
    assert "pip install --find-links WHEELHOUSE 'outcommit-gcs'" in message
    assert "pip install './plugins/gcs'" in message and "not on PyPI" in message
    assert "\n" not in message and not FROM_PYPI.search(message), message


@pytest.mark.parametrize("recorded", [
    None,                     # a wheel installed by name from a wheelhouse: pip records no URL
    '{"url": "file:///somewhere/dist/outcommit-0.1.0-py3-none-any.whl", "archive_info": {}}',
    '{"url": "https://example.invalid/outcommit.tar.gz", "archive_info": {}}',
    '{"url": "file:///not/a/checkout/core", "dir_info": {}}',
    "not json",
])
def test_a_recorded_origin_that_is_no_checkout_gives_the_general_hint(recorded: str | None,
                                                                     monkeypatch) -> None:
    class Recorded:
        def read_text(self, name: str) -> str | None:
            return recorded

    monkeypatch.setattr(md, "distribution", lambda name: Recorded())
    assert install.checkout() is None
    monkeypatch.undo()                  # the rest of outcommit reads metadata too
    monkeypatch.setattr(install, "checkout", lambda: None)
    assert install_command("outcommit", "spark").startswith(
        "pip install --find-links WHEELHOUSE 'outcommit[spark]'")


def test_extras_are_kept_in_both_forms(monkeypatch) -> None:
    assert install_command("outcommit-s3", "embedded") == f"pip install '{ROOT}/plugins/s3[embedded]'"
    monkeypatch.setattr(install, "checkout", lambda: None)
    assert "'./plugins/s3[embedded]'" in install_command("outcommit-s3", "embedded")


def test_a_command_of_a_distribution_not_installed_says_how_to_install_it(without_plugins, capsys) -> None:
    """``outcommit demo`` without outcommit-devtools was argparse's "invalid choice: 'demo'"."""
    from outcommit.cli import main

    assert main(["demo"]) == 2
    err = capsys.readouterr().err
    assert err == (f"outcommit demo: the demo is in outcommit-devtools, which is not installed: "
                   f"pip install '{ROOT / 'devtools'}'\n")
    assert main(["demo", "--help"]) == 2 and "outcommit-devtools" in capsys.readouterr().err
