"""Kafka stopped while `rtrl serve` answers: every completion is still served, the rollouts wait
in the spool and arrive once Kafka is back, nothing below the spool's bound is lost, and what
found the spool full is counted as dropped (never silently). On a broker of its own, since it
is stopped and started again."""

from __future__ import annotations

import os
import time
from pathlib import Path

import openai

from infra import broker
from infra.broker_config import ClusterLayout
from infra.kafka_dist import default_cache_root
from infra.topics import TopicNames
from infra.topics_apply import apply_topics
from tests.support.gateway import RecordTo, Serve, rollouts, serve_tiny
from tests.support.kafka import free_port_block

SPOOL = 30
DELIVERED = "rtrl_gateway_rollouts_delivered_total"


def _wait(serve: Serve, name: str, value: float, timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while serve.metrics().get(name, 0) < value:
        assert time.monotonic() < deadline, f"{name} < {value}: {serve.log.read_text()[-1500:]}"
        time.sleep(0.5)


def test_kafka_down_completions_served_rollouts_spooled_then_delivered(
        tmp_path: Path, tiny_model: Path):  # fmt: skip
    layout = ClusterLayout(tmp_path / "kafka", port=free_port_block(2), nodes=1)
    bootstrap = broker.start(layout, default_cache_root(os.environ))
    serve = None
    try:
        names = TopicNames("outage.")
        apply_topics(bootstrap, names, replication=1)
        options = ("--max-tokens", "3", "--spool-max", str(SPOOL))
        record_to = RecordTo(bootstrap, names.prefix)
        serve, key = serve_tiny(tmp_path, tiny_model, *options, record_to=record_to)
        client = openai.OpenAI(base_url=f"{serve.url}/v1", api_key=key, max_retries=0)

        def ask(interaction: str) -> None:
            done = client.completions.create(
                model="default",
                prompt="def mean(",
                extra_headers={"X-Rtrl-Interaction-Id": interaction},
            )
            assert done.choices[0].finish_reason in ("stop", "length")

        for n in range(10):
            ask(f"before-{n}")
        _wait(serve, DELIVERED, 10)
        broker.stop(layout)
        started = time.monotonic()
        for n in range(SPOOL + 10):  # the spool takes SPOOL; the last 10 find it full
            ask(f"during-{n}")
        assert time.monotonic() - started < 30, "a completion waited for Kafka"
        counts = serve.metrics_when('rtrl_gateway_rollouts_total{outcome="dropped"}', 10)
        assert counts["rtrl_gateway_spool_rollouts"] == SPOOL
        assert counts['rtrl_gateway_rollouts_dropped_total{reason="spool_full"}'] == 10
        assert counts['rtrl_gateway_rollouts_total{outcome="dropped"}'] == 10
        assert "rollouts dropped, 1 so far" in serve.log.read_text()  # said, not silent

        broker.start(layout, default_cache_root(os.environ))
        _wait(serve, DELIVERED, 10 + SPOOL)
        assert serve.metrics()["rtrl_gateway_spool_rollouts"] == 0
        assert serve.stop() == 0
        serve = None
        got = rollouts(bootstrap, names.rollouts, None)
        assert set(got) == {f"before-{n}" for n in range(10)} | {
            f"during-{n}" for n in range(SPOOL)
        }
    finally:
        if serve is not None:
            serve.stop()
        broker.stop(layout)
