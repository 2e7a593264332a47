"""The distribution's version: a leaf, so the CLI reads it without importing the package's
``__init__`` (which sits above every module: it re-exports the public API)."""

__version__ = "0.1.0"
