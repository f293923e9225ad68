"""Plain helper functions that the tests of several stages share (no fixtures: those are in
``tests/conftest.py``)."""
