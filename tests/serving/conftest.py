"""Fixtures of the gateway and HTTP-client tests: ``tiny_model``, ``registry``, the session
broker, and ``served`` with its ``client`` (`rtrl serve` on the tiny model; a module sets its
own options, model or recording by overriding ``served_setup``) from ``tests/conftest.py``;
`rtrl serve` as a child process is in ``tests/support/gateway.py``."""
