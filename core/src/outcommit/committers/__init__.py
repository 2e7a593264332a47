"""Committers shipped with core."""
