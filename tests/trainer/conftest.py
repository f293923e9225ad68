"""Fixtures of the trainer tests: ``tiny_model`` and ``registry`` from ``tests/conftest.py``;
``round_probe`` and ``distributed_probe`` are the processes the kill and torchrun tests start."""
