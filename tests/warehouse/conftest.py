"""Fixtures of the warehouse tests: the session broker from ``tests/conftest.py``; helpers to land
rows are in ``tests/support/warehouse.py``, those only these tests share in ``support``."""
