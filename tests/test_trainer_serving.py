"""The serving side on the real broker: rollouts published as they were sampled, keyed and
partitioned like their interaction's events, and a switch to each newly promoted checkpoint."""

from __future__ import annotations

from confluent_kafka import KafkaError, Message, Producer

from infra.settings import reliable_producer
from tests import trainer_fixtures
from tests.kafka_helpers import drain
from tests.trainer_fixtures import register_variant
from trainer.publish import publish_checkpoint
from trainer.rollout import Rollout
from trainer.sampling import SamplingParams
from trainer.serving import PolicyServer

tiny_model, registry = trainer_fixtures.tiny_model, trainer_fixtures.registry  # the fixtures
PARAMS = SamplingParams(max_tokens=4, temperature=0.9, top_p=0.95)


def _partitions_of(bootstrap: str, topic: str, keys: list[bytes]) -> dict[bytes | None, int | None]:
    """Where the platform's producer puts each key on ``topic``."""
    where: dict[bytes | None, int | None] = {}

    def note(_err: KafkaError | None, msg: Message) -> None:
        where[msg.key()] = msg.partition()

    producer = Producer(reliable_producer(bootstrap))
    for key in keys:
        producer.produce(topic, b"{}", key, on_delivery=note)
    assert producer.flush(30) == 0
    return where


def test_each_completion_is_published_as_its_rollout(kafka_bootstrap, topic_names, registry):
    server = PolicyServer(registry, kafka_bootstrap, topic_names, "t-0000", seed=3)
    try:
        sent = [
            r
            for r, _ in server.complete_many(
                [(f"i-{n}", [n % 8 + 1, 1, 2][: n % 3 + 1]) for n in range(12)], PARAMS
            )
        ]
        server.flush()
    finally:
        server.close()
    got = drain(kafka_bootstrap, topic_names.rollouts, 12)
    by_key = {m.key(): m for m in got}
    assert {r.interaction_id.encode() for r in sent} == set(by_key)
    for rollout in sent:
        message = by_key[rollout.interaction_id.encode()]
        assert Rollout.from_json(message.value()) == rollout
        assert rollout.checkpoint_id == "t-0000" and 1 <= len(rollout.completion_ids) <= 4
        assert rollout.sampling == PARAMS
        assert rollout.model == registry.get("t-0000").model.identity()
    # co-partitioned with the interaction's events
    events = _partitions_of(kafka_bootstrap, topic_names.events, list(by_key))
    assert {k: m.partition() for k, m in by_key.items()} == events


def test_the_server_switches_to_promoted_checkpoints_only(kafka_bootstrap, topic_names,
                                                         registry):  # fmt: skip
    topic = topic_names.checkpoints
    publish_checkpoint(kafka_bootstrap, topic, registry.get("t-0000"))
    server = PolicyServer(registry, kafka_bootstrap, topic_names, "t-0000", seed=3)
    server.follow()
    try:
        rejected = register_variant(
            registry,
            "t-0001",
            "t-0000",
            seed=1,
            status="rejected",
            reasons=("no gain",),
            batches=("b1",),
        )
        publish_checkpoint(kafka_bootstrap, topic, rejected)
        assert not server.wait_for("t-0001", 3)
        promoted = register_variant(registry, "t-0002", "t-0000", seed=2, batches=("b2",))
        publish_checkpoint(kafka_bootstrap, topic, promoted)
        assert server.wait_for("t-0002", 30)
        assert server.complete("i-x", [1, 2], PARAMS)[0].checkpoint_id == "t-0002"
        # a promoted announcement older than the one served changes nothing
        publish_checkpoint(kafka_bootstrap, topic, registry.get("t-0000"))
        assert not server.wait_for("t-0000", 3)
        assert server.checkpoint_id == "t-0002"
    finally:
        server.close()
