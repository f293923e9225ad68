"""Fixtures of the ingest tests (contract, SDKs, collector): the ``collector`` fixture is in
``tests/conftest.py`` because the simulator's test uses it too; the helpers are ``fastpath``
(the fast path against the reference parser), ``sdk_py`` and ``sdk_ts`` (the two SDKs driven
from Python) and ``tests/support/collector.py``."""
