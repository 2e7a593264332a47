"""Shared test configuration: plugins load from installed entry points as users get them."""
