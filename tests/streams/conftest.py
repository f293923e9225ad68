"""Fixtures of the stream tests: the session broker from ``tests/conftest.py``; the helpers that
build expected reward records and start a worker are in ``support``."""
