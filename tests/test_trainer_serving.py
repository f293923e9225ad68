"""The serving side on the real broker: rollouts published as they were sampled, keyed and
partitioned like their interaction's events, and a switch to each newly promoted checkpoint."""

from __future__ import annotations

from confluent_kafka import KafkaError, Message, Producer

from infra.settings import reliable_producer
from tests.kafka_helpers import drain
from trainer.policy import PolicyConfig, new_policy
from trainer.publish import publish_checkpoint
from trainer.registry import CheckpointRegistry
from trainer.rollout import Rollout
from trainer.serving import PolicyServer

SMALL = PolicyConfig(vocab_size=8, hidden=8, max_new_tokens=4)


def _registry(tmp_path) -> CheckpointRegistry:
    registry = CheckpointRegistry(tmp_path / "ckpt")
    registry.register(new_policy(SMALL, seed=0), checkpoint_id="p-0000", parent=None, evals={},
                      batches=(), status="promoted")
    return registry


def _partitions_of(bootstrap: str, topic: str,
                   keys: list[bytes]) -> dict[bytes | None, int | None]:
    """Where the platform's producer puts each key on ``topic``."""
    where: dict[bytes | None, int | None] = {}

    def note(_err: KafkaError | None, msg: Message) -> None:
        where[msg.key()] = msg.partition()

    producer = Producer(reliable_producer(bootstrap))
    for key in keys:
        producer.produce(topic, b"{}", key, on_delivery=note)
    assert producer.flush(30) == 0
    return where


def test_each_completion_is_published_as_its_rollout(kafka_bootstrap, topic_names, tmp_path):
    server = PolicyServer(_registry(tmp_path), kafka_bootstrap, topic_names, "p-0000", seed=3)
    try:
        sent = [server.complete(f"i-{n}", [n % 8, 1, 2]) for n in range(12)]
        server.flush()
    finally:
        server.close()
    got = drain(kafka_bootstrap, topic_names.rollouts, 12)
    by_key = {m.key(): m for m in got}
    assert {r.interaction_id.encode() for r in sent} == set(by_key)
    for rollout in sent:
        message = by_key[rollout.interaction_id.encode()]
        assert Rollout.from_json(message.value()) == rollout
        assert rollout.checkpoint_id == "p-0000" and len(rollout.completion_ids) == 4
    # co-partitioned with the interaction's events
    events = _partitions_of(kafka_bootstrap, topic_names.events, list(by_key))
    assert {k: m.partition() for k, m in by_key.items()} == events


def test_the_server_switches_to_promoted_checkpoints_only(kafka_bootstrap, topic_names,
                                                         tmp_path):  # fmt: skip
    registry = _registry(tmp_path)
    topic = topic_names.checkpoints
    publish_checkpoint(kafka_bootstrap, topic, registry.get("p-0000"))
    server = PolicyServer(registry, kafka_bootstrap, topic_names, "p-0000", seed=3)
    server.follow()
    try:
        rejected = registry.register(new_policy(SMALL, seed=1), checkpoint_id="p-0001",
                                     parent="p-0000", evals={}, batches=("b1",),
                                     status="rejected", reasons=("no gain",))
        publish_checkpoint(kafka_bootstrap, topic, rejected)
        assert not server.wait_for("p-0001", 3)
        promoted = registry.register(new_policy(SMALL, seed=2), checkpoint_id="p-0002",
                                     parent="p-0000", evals={}, batches=("b2",),
                                     status="promoted")
        publish_checkpoint(kafka_bootstrap, topic, promoted)
        assert server.wait_for("p-0002", 30)
        assert server.complete("i-x", [1, 2]).checkpoint_id == "p-0002"
        # a promoted announcement older than the one served changes nothing
        publish_checkpoint(kafka_bootstrap, topic, registry.get("p-0000"))
        assert not server.wait_for("p-0000", 3)
        assert server.checkpoint_id == "p-0002"
    finally:
        server.close()
