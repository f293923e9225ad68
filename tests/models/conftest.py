"""Fixtures of the model-layer tests: ``tiny_model`` and ``registry`` from ``tests/conftest.py``."""
