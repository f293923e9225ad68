"""Checkpoint announcements on a real broker: the compacted topic yields the latest per id."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from checkpoints.publish import publish_checkpoint, read_checkpoints
from checkpoints.record import CheckpointInfo, ModelRef, TrainingRef, WeightsRef
from infra.topics import TopicNames
from tests.support.kafka import produce_json


def info(checkpoint_id: str, parent: str | None = None, **changes: object) -> CheckpointInfo:
    model = ModelRef(
        family="llama", base_path="/m", base_sha256="0" * 64, tokenizer_sha256="1" * 64
    )
    base = CheckpointInfo(
        checkpoint_id,
        parent,
        f"/reg/{checkpoint_id}",
        model,
        WeightsRef(kind="base"),
        TrainingRef(),
        "2026-11-30T10:00:00Z",
        {"gate": {"gain": 0.1}},
        ("b1",),
        "promoted",
        (),
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def test_read_back_gives_the_latest_announcement_of_each(
    kafka_bootstrap: str, topic_names: TopicNames
) -> None:
    topic = topic_names.checkpoints
    assert read_checkpoints(kafka_bootstrap, topic) == {}  # an empty topic
    first, second = info("c1"), info("c2", parent="c1")
    publish_checkpoint(kafka_bootstrap, topic, first)
    publish_checkpoint(kafka_bootstrap, topic, second)
    assert read_checkpoints(kafka_bootstrap, topic) == {"c1": first, "c2": second}
    revised = replace(first, evals={"gate": {"gain": 0.2}, "online": {"reward": 0.6}})
    publish_checkpoint(kafka_bootstrap, topic, revised)
    # a record that is no announcement of its key is skipped, never fatal to readers
    produce_json(kafka_bootstrap, topic, [{"checkpoint_id": "c3"}], key=lambda _v: "c3")
    assert read_checkpoints(kafka_bootstrap, topic) == {"c1": revised, "c2": second}


def test_unreachable_broker_fails_quickly() -> None:
    started = time.monotonic()
    with pytest.raises(RuntimeError, match="'c1' was not announced"):
        publish_checkpoint("127.0.0.1:1", "checkpoints", info("c1"), timeout_s=3)
    with pytest.raises(RuntimeError, match="reading checkpoints failed"):
        read_checkpoints("127.0.0.1:1", "checkpoints", timeout_s=3)
    assert time.monotonic() - started < 15
