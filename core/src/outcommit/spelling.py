"""The closest spellings of a name among those that exist ("did you mean").

A leaf, so every layer can offer the guess where it refuses a name (a committer, a
configuration key, a choice): a typo must get the fix in its one-line error, not a list
to read through.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def did_you_mean(name: str, candidates: Iterable[str], limit: int = 3, cutoff: float = 0.85) -> list[str]:
    """The closest spellings of ``name`` among ``candidates`` (case-insensitive), best first."""
    by_lower = {c.lower(): c for c in candidates}
    return [by_lower[m] for m in difflib.get_close_matches(name.lower(), list(by_lower), n=limit,
                                                             cutoff=cutoff)]


def guess(name: str, candidates: Iterable[str], cutoff: float = 0.6) -> str:
    """``": did you mean X?"`` (or ``"X or Y"``) for a refused ``name``; ``""`` when nothing is close.

    The cutoff is lower than :func:`did_you_mean`'s: short names (``magik``, ``mgic``)
    differ from what was meant by a larger share of their letters.
    """
    found = did_you_mean(name, candidates, cutoff=cutoff)
    return f": did you mean {' or '.join(found)}?" if found else ""
