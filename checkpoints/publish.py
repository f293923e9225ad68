"""Announce checkpoints on the ``checkpoints`` topic, and read back what it holds.

The topic is compacted and keyed by ``checkpoint_id``: it keeps the latest announcement of every
checkpoint, so a reader that starts from the beginning learns the whole registry (ids, parents,
where the weights are, eval figures, the batches trained on) without access to its directory.
A tombstone (null value) withdraws a checkpoint: readers forget that key.
"""

from __future__ import annotations

import logging

import orjson
from confluent_kafka import KafkaError, KafkaException, Message, Producer

from checkpoints.record import CheckpointInfo
from checkpoints.store import CheckpointRegistry
from infra.compacted import read_latest
from infra.kafka_errors import KafkaRefused, is_refusal, refusal_sentence
from infra.settings import process_security, reliable_producer

log = logging.getLogger(__name__)


def publish_checkpoint(
    bootstrap: str, topic: str, info: CheckpointInfo, timeout_s: float = 30
) -> None:
    """Produce one announcement and wait until every in-sync replica has it.

    Raises RuntimeError with the broker's reason when it is not acknowledged within ``timeout_s``.
    """
    if timeout_s <= 0:
        raise ValueError("timeout_s must be > 0")
    settings = reliable_producer(bootstrap, **{"message.timeout.ms": int(timeout_s * 1000)})
    producer = Producer(settings)
    errors: list[KafkaError] = []

    def note_error(err: KafkaError | None, _msg: Message) -> None:
        if err:
            errors.append(err)

    producer.produce(
        topic,
        key=info.checkpoint_id.encode(),
        value=orjson.dumps(info.to_json_dict()),
        on_delivery=note_error,
    )
    # A little longer than the message timeout, so that its delivery report (the reason) arrives.
    left = producer.flush(timeout_s + 5)
    if errors and is_refusal(errors[0].code()):
        raise KafkaRefused(
            refusal_sentence(errors[0].code(), process_security(), "write to", topic)
        )
    if left or errors:
        reason = errors[0].str() if errors else "no acknowledgement in time"
        raise RuntimeError(
            f"checkpoint {info.checkpoint_id!r} was not announced on {topic}: {reason}"
        )


def read_checkpoints(
    bootstrap: str, topic: str, timeout_s: float = 10
) -> dict[str, CheckpointInfo]:
    """The latest announcement of every checkpoint (``infra.compacted.read_latest``).

    A record that is not a valid announcement of its key is logged and counts as withdrawing that
    key (as a tombstone does): failing instead would stop every reader for good, since compaction
    keeps the bad record, and an older value of the key is no longer its latest.
    Raises RuntimeError when the topic cannot be read.
    """
    try:
        latest = read_latest(bootstrap, topic, timeout_s)
    except KafkaException as exc:
        error = exc.args[0]
        if isinstance(error, KafkaError) and is_refusal(error.code()):
            sentence = refusal_sentence(error.code(), process_security(), "read", topic)
            raise KafkaRefused(sentence) from None
        raise RuntimeError(f"reading {topic} failed: {error}") from None
    out: dict[str, CheckpointInfo] = {}
    for key, value in latest.items():
        info = decode_announcement(key, value, topic)
        if info is not None:
            out[info.checkpoint_id] = info
    return out


def decode_announcement(key: bytes | None, value: bytes, topic: str) -> CheckpointInfo | None:
    """The checkpoint a message announces; None (said in the log) when it is not a valid
    announcement of its key."""
    checkpoint_id = key.decode(errors="replace") if key is not None else None
    try:
        info = CheckpointInfo.from_json_dict(orjson.loads(value))
    except ValueError as exc:  # orjson's decode error is one too
        log.warning(
            "%s: not a checkpoint announcement (%s), key %r dropped", topic, exc, checkpoint_id
        )
        return None
    if info.checkpoint_id != checkpoint_id:
        log.warning("%s: key %r announces %r, dropped", topic, checkpoint_id, info.checkpoint_id)
        return None
    return info


def announce_missing(
    bootstrap: str, topic: str, registry: CheckpointRegistry, timeout_s: float = 30
) -> list[str]:
    """Announce every registered checkpoint that ``topic`` does not hold as registered; return
    their ids.

    Registering comes first and announcing second, so a trainer killed between the two leaves a
    checkpoint nobody heard of; the next call catches up. Announcing is idempotent (the same
    value under the same key of a compacted topic), and the serving side ignores a promoted
    checkpoint older than the one it serves, so announcing again is harmless.
    """
    held = read_checkpoints(bootstrap, topic, timeout_s)
    missing = [info for info in registry.list() if held.get(info.checkpoint_id) != info]
    for info in missing:
        publish_checkpoint(bootstrap, topic, info, timeout_s)
        log.info("announced %s on %s", info.checkpoint_id, topic)
    return [info.checkpoint_id for info in missing]
