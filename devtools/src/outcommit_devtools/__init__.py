"""Development tools of outcommit: used by its tests, benchmarks and docs, never shipped.

Nothing in the ``outcommit`` distribution or its plugins imports this package.
"""
