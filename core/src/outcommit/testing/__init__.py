"""Test support shipped with core: the shared conformance suite and a fault-injecting store.

Third-party store plugins subclass :class:`~outcommit.testing.conformance.CommitterConformance`
with their own fixtures, as fsspec backends subclass fsspec's abstract tests; the suites
need pytest (``outcommit[testing]``).

In a pytest run the suites' modules are registered for pytest's assertion rewriting before
anything imports them, so a failing oracle shows its values (``assert found == expected``
with both sides) instead of a bare ``AssertionError``: pytest rewrites only test modules
and conftests unless told. Only where pytest is already imported (a test run): the other
users of this package (the dev tools' fault injection) never import pytest for it. Not a
``pytest11`` plugin: that would load into every pytest run of every project that has
outcommit installed.
"""

import sys

_pytest = sys.modules.get("pytest")
if _pytest is not None:
    _pytest.register_assert_rewrite(
        "outcommit.testing.conformance", "outcommit.testing.suite", "outcommit.testing.lifecycle",
        "outcommit.testing.recovery", "outcommit.testing.isolation", "outcommit.testing.stores",
        "outcommit.testing.faults", "outcommit.testing.roots", "outcommit.testing.names")

from ..errors import InjectedFault  # noqa: E402  (after the registration above)
from .faults import Fault, FaultInjectingStore  # noqa: E402

__all__ = ["Fault", "FaultInjectingStore", "InjectedFault"]
