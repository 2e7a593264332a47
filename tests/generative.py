"""Budgets of the generative tests (hypothesis): one place says how much each run tries.

Two profiles, chosen by ``OUTCOMMIT_HYPOTHESIS`` (``tests/conftest.py`` loads it):

``ci`` (the default, what ``make test`` and CI run)
    Each test's own small budget (``budget(n)``: ``n`` examples), a fixed seed
    (``--hypothesis-seed`` in pyproject's ``addopts``), so every CI run tries the same cases,
    and the examples stored in ``tests/hypothesis-examples/`` replayed first, read-only:
    a failure a long run found and saved is tried again by every later run.
``long`` (``make generative``)
    ``LONG_FACTOR`` times each budget, a new seed per run (printed), the stores behind the
    emulators too (moto S3, Azurite, the GCS emulator: ``long_run()`` tells a test), and any
    failure saved to ``tests/hypothesis-examples/`` (commit it, and add the shrunk case as a
    plain regression test beside the property).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis.database import DirectoryBasedExampleDatabase, ReadOnlyDatabase

EXAMPLES_DIR = Path(__file__).resolve().parent / "hypothesis-examples"
PROFILE_ENV = "OUTCOMMIT_HYPOTHESIS"
LONG_FACTOR = 20

_COMMON: dict[str, Any] = {
    # Real stores and servers: an example's time says nothing (no deadlines), and a rule
    # that does I/O is slow by hypothesis' measure.
    "deadline": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large,
                              HealthCheck.function_scoped_fixture],
    "print_blob": True,
}

settings.register_profile(
    "ci", database=ReadOnlyDatabase(DirectoryBasedExampleDatabase(EXAMPLES_DIR)), **_COMMON)
settings.register_profile(
    "long", database=DirectoryBasedExampleDatabase(EXAMPLES_DIR), **_COMMON)


def profile() -> str:
    name = os.environ.get(PROFILE_ENV, "ci")
    if name not in ("ci", "long"):
        raise ValueError(f"{PROFILE_ENV}={name!r}: expected 'ci' or 'long'")
    return name


def long_run() -> bool:
    """Is this the long run (``make generative``): larger budgets, the emulators' stores too."""
    return profile() == "long"


def budget(examples: int, **overrides: Any) -> settings:
    """Settings for a test that tries ``examples`` cases in CI (``LONG_FACTOR`` times that in a long run)."""
    return settings(max_examples=examples * (LONG_FACTOR if long_run() else 1), **overrides)


settings.load_profile(profile())
