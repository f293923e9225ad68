"""What an acknowledged write is worth: a 3-node cluster loses a leader mid-stream.

Topic: 3 partitions, replication 3, ``min.insync.replicas=2``. The producer is the
platform's own (``infra.settings.reliable_producer``: idempotent, ``acks=all``). While it
sends numbered messages we SIGKILL the node leading partition 0 and keep sending. Every
message whose delivery report said success must afterwards be readable exactly once, and
each partition must hold its numbers in send order.
"""

from __future__ import annotations

import os
import time
from collections import Counter, defaultdict

import orjson
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from infra import broker
from infra.broker_config import ClusterLayout
from infra.kafka_dist import default_cache_root
from infra.settings import admin as admin_conf
from infra.settings import client, reliable_producer
from tests.infra.infra_probe import quiet_port_block

TOPIC = "durable"
PARTITIONS = 3
TOTAL = 12_000
KILL_AT = 4_000


@pytest.fixture
def cluster(tmp_path):
    layout = ClusterLayout(tmp_path / "cluster", port=quiet_port_block(6), nodes=3)
    try:
        broker.start(layout, default_cache_root(os.environ), timeout=120)
        yield layout
    finally:
        broker.stop(layout)


def _leader(admin: AdminClient, partition: int, timeout: float = 30.0) -> int:
    """The partition's leader, once the metadata knows it (a topic just created may be listed
    before its partitions are)."""
    deadline = time.monotonic() + timeout
    while True:
        found = admin.list_topics(TOPIC, timeout=10).topics.get(TOPIC)
        leader = found.partitions.get(partition) if found is not None else None
        if leader is not None and leader.leader >= 0:
            return leader.leader
        assert time.monotonic() < deadline, f"no leader for {TOPIC}/{partition}"
        time.sleep(0.2)


def _send_all(producer: Producer, on_kill) -> tuple[list[tuple[int, int]], list[str]]:
    """Send 0..TOTAL-1 round-robin over the partitions; return (acked (partition, n), errors)."""
    acked: list[tuple[int, int]] = []
    errors: list[str] = []

    def report(err, msg) -> None:
        if err is None:
            acked.append((msg.partition(), orjson.loads(msg.value())["n"]))
        else:
            errors.append(str(err))

    for n in range(TOTAL):
        if n == KILL_AT:
            producer.flush(30)  # some acknowledged before the crash, for sure
            on_kill()
        while True:
            try:
                producer.produce(
                    TOPIC,
                    value=orjson.dumps({"n": n}),
                    partition=n % PARTITIONS,
                    on_delivery=report,
                )
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
        if n % 200 == 0:
            time.sleep(0.01)  # a stream, not one burst: the crash lands between sends
    assert producer.flush(90) == 0, "messages still queued after 90 s"
    return acked, errors


def _read_all(bootstrap: str) -> dict[int, list[int]]:
    c = Consumer(client(bootstrap, **{"group.id": "verify", "enable.auto.commit": False}))
    try:
        ends = {
            p: c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=20)[1]
            for p in range(PARTITIONS)
        }
        c.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
        got: dict[int, list[int]] = defaultdict(list)
        deadline = time.monotonic() + 60
        while sum(len(v) for v in got.values()) < sum(ends.values()):
            assert time.monotonic() < deadline, f"read {got and len(got)} of {ends}"
            for m in c.consume(1000, timeout=1):
                assert m.error() is None, m.error()
                partition, value = m.partition(), m.value()
                assert partition is not None and value is not None
                got[partition].append(orjson.loads(value)["n"])
    finally:
        c.close()
    return got


@pytest.mark.slow
def test_acknowledged_writes_survive_leader_sigkill_exactly_once_in_order(cluster):
    bootstrap = cluster.bootstrap
    admin = AdminClient(admin_conf(bootstrap))
    new = NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})
    for fut in admin.create_topics([new]).values():
        fut.result(timeout=30)
    leader = _leader(admin, 0)
    killed: list[int] = []

    def kill_leader() -> None:
        broker.kill_node(cluster, leader - 1)  # node ids are 1-based, node dirs 0-based
        killed.append(leader)

    producer = Producer(reliable_producer(bootstrap, **{"message.timeout.ms": 60_000}))
    acked, errors = _send_all(producer, kill_leader)

    assert killed == [leader]
    assert len(broker.running_nodes(cluster)) == 2
    assert _leader(admin, 0) not in (leader, -1), "partition 0 should have a new leader"
    assert sum(1 for _, n in acked if n >= KILL_AT) > 0, "nothing acknowledged after the kill"
    got = _read_all(bootstrap)

    counts = Counter(n for ns in got.values() for n in ns)
    assert [n for n, c in counts.items() if c > 1] == [], "idempotence: no duplicates"
    lost = [n for _, n in acked if counts[n] != 1]
    assert lost == [], f"{len(lost)} acknowledged messages missing, e.g. {lost[:5]}"
    for p, ns in got.items():
        assert ns == sorted(ns), f"partition {p} out of order"
        assert all(n % PARTITIONS == p for n in ns)
    # With idempotence and a 60 s timeout, a leader change costs latency, not messages.
    assert errors == [] and len(acked) == TOTAL
