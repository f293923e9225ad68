"""Fixtures of the release tests (gate, off-policy estimate, candidate evals, canary):
``tiny_model`` and ``registry`` from ``tests/conftest.py``."""
