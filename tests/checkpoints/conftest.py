"""Fixtures of the checkpoint tests: ``tiny_model`` and ``registry`` from ``tests/conftest.py``."""
