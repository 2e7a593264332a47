"""Optional requirements, said where they are first needed: which extra brings them.

Core depends on fsspec alone; the engines need pyarrow (extra ``engine``), the suites of
``outcommit.testing`` need pytest (extra ``testing``). Without them a user met a bare
``ModuleNotFoundError: No module named 'pyarrow'`` from deep inside; :func:`require` at
each entry point names the extra and the install command instead (``outcommit.install``:
this checkout or a wheelhouse, never PyPI by name).
"""

from __future__ import annotations

from importlib.util import find_spec

from .errors import MissingDependencyError
from .install import CORE, install_command


def installed(module: str) -> bool:
    """Whether ``module`` can be imported (not importing it)."""
    try:
        return find_spec(module) is not None
    except (ImportError, ValueError):  # a parent that is missing, or a module set to None
        return False


def require(module: str, extra: str, needed_by: str, distribution: str = CORE) -> None:
    """Raise :class:`MissingDependencyError` naming ``extra`` when ``module`` is not installed."""
    if not installed(module):
        raise MissingDependencyError(
            f"{needed_by} needs {module}, which is not installed: {install_command(distribution, extra)} "
            f"(the {extra!r} extra of {distribution})", module)
