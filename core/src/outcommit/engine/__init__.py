"""Engines drive committers: the local thread/process driver here, PySpark in ``outcommit.spark``."""
