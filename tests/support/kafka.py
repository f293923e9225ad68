"""Small helpers for tests that talk to a real broker: produce, drain, free ports."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

import orjson
from confluent_kafka import Consumer, KafkaError, Message, Producer

from infra.ports import free_port_block  # noqa: F401 - re-exported for the tests
from infra.settings import client


def produce_json(
    bootstrap: str,
    topic: str,
    values: Iterable[Any],
    key: Callable[[Any], str | None] = lambda v: None,
) -> int:
    """Produce JSON values with acks=all and wait until every one is acknowledged."""
    return produce_raw(
        bootstrap,
        topic,
        ((None if (k := key(v)) is None else k.encode(), orjson.dumps(v), None) for v in values),
    )


Headers = list[tuple[str, bytes | None]] | None


def produce_raw(
    bootstrap: str, topic: str, messages: Iterable[tuple[bytes | None, bytes | None, Headers]]
) -> int:
    """Produce (key, value, headers) as they are (a None value is a tombstone), acks=all, and
    wait until every one is acknowledged. Messages of one key keep their order."""
    p = Producer(
        client(
            bootstrap,
            **{
                "enable.idempotence": True,
                "linger.ms": 5,
                "partitioner": "murmur2_random",
            },
        )
    )
    errors: list[Any] = []

    def note_error(err: KafkaError | None, _msg: Message) -> None:
        if err:
            errors.append(err)

    n = 0
    for k, v, headers in messages:
        sent: list[tuple[str, str | bytes | None]] | None = None if headers is None else [*headers]
        while True:
            try:
                p.produce(topic, value=v, key=k, headers=sent, on_delivery=note_error)
                break
            except BufferError:  # the local queue is full: let deliveries drain it
                p.poll(0.1)
        n += 1
        if n % 1_000 == 0:
            p.poll(0)
    left = p.flush(60)
    assert left == 0 and not errors, f"{left} unflushed, errors: {errors[:3]}"
    return n


def drain(
    bootstrap: str,
    topic: str,
    expected: int | None = None,
    timeout: float = 60.0,
    idle: float = 3.0,
) -> list[Any]:
    """Read a topic from the beginning until ``expected`` messages arrived (or ``idle`` seconds
    pass with nothing new, when ``expected`` is None). Returns the raw messages."""
    c = Consumer(
        client(
            bootstrap,
            **{
                "group.id": f"drain-{time.monotonic_ns()}",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            },
        )
    )
    c.subscribe([topic])
    out: list[Any] = []
    deadline = time.monotonic() + timeout
    last_new = time.monotonic()
    try:
        while time.monotonic() < deadline:
            if expected is not None and len(out) >= expected:
                break
            if expected is None and out and time.monotonic() - last_new > idle:
                break
            batch = c.consume(1000, timeout=0.5)
            for m in batch:
                if m.error() is None:
                    out.append(m)
            if batch:
                last_new = time.monotonic()
    finally:
        c.close()
    return out
