"""Fixtures of the ``rtrl`` tests (console script, run loop, simulator, report page): the shared
ones from ``tests/conftest.py``; ``browser`` renders the report page in headless Chromium."""
