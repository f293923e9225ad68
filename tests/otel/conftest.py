"""The OTLP export's fixtures: a real OTLP/HTTP logs receiver in this process and Arize
Phoenix as a subprocess (``tests/support/otel.py``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.otel import LogsReceiver, Phoenix, running_logs_receiver, running_phoenix


@pytest.fixture
def logs_receiver() -> Iterator[LogsReceiver]:
    with running_logs_receiver() as receiver:
        yield receiver


@pytest.fixture(scope="session")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Phoenix]:
    with running_phoenix(tmp_path_factory.mktemp("phoenix")) as running:
        yield running
