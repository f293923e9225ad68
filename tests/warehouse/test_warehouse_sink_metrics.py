"""The sink without a broker: its metrics endpoint and the checks of its options."""

from __future__ import annotations

import httpx

from tests.support.kafka import free_port_block
from warehouse.sink_metrics import SinkMetrics


class _Message:
    def __init__(self, topic: str) -> None:
        self._topic = topic

    def topic(self) -> str:
        return self._topic


def test_consumed_messages_are_counted_per_dataset_and_served() -> None:
    metrics = SinkMetrics()
    metrics.count_consumed(
        [_Message("t.rewards"), _Message("t.events"), _Message("t.rewards")],
        {"t.rewards": "rewards", "t.events": "events"},
    )
    port = free_port_block(1)
    server = metrics.serve(port, host="127.0.0.1")
    try:
        text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    finally:
        server.shutdown()
    assert 'rtrl_sink_consumed_total{dataset="rewards"} 2.0' in text
    assert 'rtrl_sink_consumed_total{dataset="events"} 1.0' in text
    assert "process_resident_memory_bytes" in text and "process_start_time_seconds" in text


def test_bad_sink_options_are_refused_with_a_reason(tmp_path, capsys) -> None:
    from rtrl.cli import build_parser

    for argv in (["--max-rows", "0"], ["--metrics-port", "70000"]):
        args = build_parser().parse_args(["warehouse", "sink", "--warehouse", str(tmp_path), *argv])
        assert args.func(args) == 2
        assert "must be" in capsys.readouterr().err
