"""Internals shared across folders; not part of the public API."""
