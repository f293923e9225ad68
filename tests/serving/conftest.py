"""Fixtures of the gateway and HTTP-client tests: ``tiny_model``, ``registry`` and the session
broker from ``tests/conftest.py``; `rtrl serve` as a child process is in
``tests/support/gateway.py``."""
