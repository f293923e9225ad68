"""`rtrl simulate`'s users over the real path: each asks a real gateway (`rtrl serve` on the
tiny model) over HTTP and reports through the SDK to a real collector; every event lands on
`telemetry.events` stamped with the interaction and checkpoint the gateway answered with, and
the gateway's rollout of each interaction is on `rollouts` under the same id."""

from __future__ import annotations

import httpx

from ingest.sdk import Client, SdkConfig
from models.sampling import SamplingParams
from rtrl.simulate import SimulateSettings, simulate, simulate_steady
from tests.support.collector import ORG, drain_events
from tests.support.gateway import Serve, rollouts


def _gateway_and_sdk(tmp_path, registry, collector, kafka_bootstrap, topic_names,  # noqa: ANN001
                     max_tokens: int) -> tuple[Serve, SdkConfig]:  # fmt: skip
    """The tiny model's gateway on the collector's keys, and the SDK's settings for its org."""
    serve = Serve(
        ["--registry", str(registry.root), "--checkpoint", "t-0000", "--key-db",
         str(collector.config.key_db), "--bootstrap", kafka_bootstrap, "--topic-prefix",
         topic_names.prefix, "--max-tokens", str(max_tokens), "--no-follow"],
        tmp_path / "serve.log",
    )  # fmt: skip
    sdk_config = SdkConfig(endpoint=collector.url, api_key=collector.key, org_id=ORG,
                           spool_path=tmp_path / "spool.db")  # fmt: skip
    return serve, sdk_config


def test_users_ask_the_gateway_and_report_through_the_sdk(
        tmp_path, registry, collector, kafka_bootstrap, topic_names):  # fmt: skip
    serve, sdk_config = _gateway_and_sdk(tmp_path, registry, collector, kafka_bootstrap,
                                         topic_names, max_tokens=24)  # fmt: skip
    try:
        with httpx.Client(base_url=serve.url, timeout=120,
                          headers={"Authorization": f"Bearer {collector.key}"}) as http, \
                Client(sdk_config) as sdk:  # fmt: skip
            tally = simulate(http, sdk, users=6, per_user=2, seed=3,
                             params=SamplingParams(max_tokens=24))  # fmt: skip
            assert sdk.flush(timeout=60) == 0
    finally:
        serve.stop()
    assert tally["interactions"] == 12
    served = rollouts(kafka_bootstrap, topic_names.rollouts, 12)
    events = drain_events(kafka_bootstrap, topic_names.events)
    by_interaction: dict[str, list[dict]] = {}
    for event in events:
        by_interaction.setdefault(event["interaction_id"], []).append(event)
    assert set(by_interaction) == set(served)  # the join key, end to end
    for interaction, evs in by_interaction.items():
        types = [e["type"] for e in evs]
        assert types[0] == "interaction.started" and "interaction.completed" in types
        assert {e["checkpoint_id"] for e in evs} == {served[interaction].checkpoint_id}
        assert len({e["user_id"] for e in evs}) == 1
    assert len({e["user_id"] for e in events}) == 6


def test_steady_users_arrive_at_the_rate_until_the_end_and_every_event_lands(
        tmp_path, registry, collector, kafka_bootstrap, topic_names):  # fmt: skip
    serve, sdk_config = _gateway_and_sdk(tmp_path, registry, collector, kafka_bootstrap,
                                         topic_names, max_tokens=16)  # fmt: skip
    settings = SimulateSettings(gateway=serve.url, collector=collector.url, org=ORG, users=3,
                                max_tokens=16, rate_per_min=120, duration_s=10,
                                threads=2)  # fmt: skip
    try:
        with httpx.Client(base_url=serve.url, timeout=120,
                          headers={"Authorization": f"Bearer {collector.key}"}) as http, \
                Client(sdk_config) as sdk:  # fmt: skip
            tally, traffic = simulate_steady(http, sdk, settings, stop=lambda: False)
            assert sdk.flush(timeout=60) == 0
    finally:
        serve.stop()
    assert 20 - 5 * 20**0.5 < traffic.started < 20 + 5 * 20**0.5  # ~20 arrivals in 10 s
    assert traffic.failed == {} and tally["interactions"] == len(traffic.outcomes)
    assert tally["interactions"] + traffic.shed == traffic.started
    events = drain_events(kafka_bootstrap, topic_names.events)
    interactions = {o.answer.interaction_id for o in traffic.outcomes}
    assert {e["interaction_id"] for e in events} == interactions
    assert {e["user_id"] for e in events} <= {f"u_sim0_{u:05d}" for u in range(3)}
