"""Test support shipped with core: the shared conformance suite and a fault-injecting store.

Third-party store plugins subclass :class:`~outcommit.testing.conformance.CommitterConformance`
with their own fixtures, as fsspec backends subclass fsspec's abstract tests.
"""

from ..errors import InjectedFault
from .faults import Fault, FaultInjectingStore

__all__ = ["Fault", "FaultInjectingStore", "InjectedFault"]
