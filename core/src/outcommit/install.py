"""How to install one of this project's distributions, said the way that works today.

The distributions are not on PyPI, so installing ``outcommit-gcs`` by name from there would
install whatever someone registered under that name. Every install hint (errors, the CLI) comes from
:func:`install_command`: the checkout this installation was made from, when pip recorded
one (an editable or path install), else a wheelhouse built by ``make wheels`` or a
checkout's directory (docs/install.md).
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import unquote, urlparse

CORE = "outcommit"


def source_directory(distribution: str) -> str:
    """The directory of a distribution in the repository: ``core``, ``plugins/<name>``, ``devtools``."""
    if distribution == CORE:
        return "core"
    name = distribution.removeprefix(f"{CORE}-")
    return "devtools" if name == "devtools" else f"plugins/{name}"


def checkout() -> Path | None:
    """The repository this ``outcommit`` was installed from, if pip recorded it (PEP 610)."""
    import importlib.metadata as md

    try:
        recorded = md.distribution(CORE).read_text("direct_url.json")
        url = json.loads(recorded or "{}").get("url", "")
    except (md.PackageNotFoundError, ValueError, AttributeError):
        return None
    parsed = urlparse(url)
    if parsed.scheme != "file":
        return None
    core = Path(unquote(parsed.path))
    root = core.parent
    # A wheel file, or a directory that is not a checkout of this repository: no path to give.
    if core.name != "core" or not (root / "plugins").is_dir() or not (core / "pyproject.toml").is_file():
        return None
    return root


def install_command(distribution: str, extra: str | None = None) -> str:
    """A pip command that installs ``distribution`` (with ``extra``), never from PyPI by name."""
    spec = f"[{extra}]" if extra else ""
    root = checkout()
    if root is not None:
        return f"pip install '{root / source_directory(distribution)}{spec}'"
    return (f"pip install --find-links WHEELHOUSE '{distribution}{spec}' (WHEELHOUSE: the dist/ that "
            f"'make wheels' builds), or from a checkout: pip install "
            f"'./{source_directory(distribution)}{spec}' (not on PyPI: docs/install.md)")
