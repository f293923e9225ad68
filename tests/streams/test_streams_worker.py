"""The stream worker on a real broker: stream == batch, through SIGKILLs and a shared group.

The same flow as ``test_streams_processor.py``, through Kafka and ``python -m streams``: the whole
workload is produced to ``telemetry.events`` first (keyed by interaction_id), then the worker
runs; the idle-partition rule closes the last windows with the wall clock (the workload lies in
the past). ``rewards`` must then hold, per interaction, a latest revision equal in every field but
``revision`` to what ``rewards.replay`` says over the same events, with revisions 0..n and no
revision number naming two different records.
"""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path

import orjson
import polars as pl
import pytest

from infra.settings import client
from infra.topics import JOIN_PARTITIONS, TopicNames
from rewards.config import RewardConfig
from rewards.eventio import EVENT_SCHEMA
from rewards.record import frame_to_records
from rewards.replay import replay
from rewards.workload import generate_workload
from tests.streams.support import PAST_START, TopicReader, Workers, latest_revisions
from tests.support.kafka import free_port_block, produce_json

pytestmark = pytest.mark.slow
STORE = tuple(os.environ.get("RTRL_TEST_STREAM_STORE", "").split())


def replay_records(events: list[dict]) -> dict[str, dict]:
    """The batch side: ``rewards.replay`` over the same events, revision left out."""
    frame = replay(pl.DataFrame(events, schema=EVENT_SCHEMA), RewardConfig())
    out = {}
    for record in frame_to_records(frame):
        body = record.to_json_dict()
        del body["revision"]
        out[body["interaction_id"]] = body
    return out


def wait_until_equal(reader: TopicReader, expected: dict[str, dict], workers: Workers,
                     timeout: float) -> dict[str, dict]:  # fmt: skip
    deadline = time.monotonic() + timeout
    latest: dict[str, dict] = {}
    while time.monotonic() < deadline:
        reader.poll(2.0)
        latest, problems = latest_revisions(reader.values())
        assert problems == [], problems[:5]
        if latest == expected:
            return latest
        if all(p.poll() is not None for p in workers.procs):
            break
    missing = [k for k in expected if k not in latest]
    wrong = [k for k in expected if k in latest and latest[k] != expected[k]]
    pytest.fail(
        f"{len(missing)} interactions missing, {len(wrong)} differ "
        f"(e.g. {(missing + wrong)[:2]})\n{workers.logs()}"
    )


def wait_for_records(reader: TopicReader, count: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while len(reader.messages) < count and time.monotonic() < deadline:
        reader.poll(0.5)


def _run(kafka_bootstrap: str, topic_names: TopicNames, tmp_path: Path, n_interactions: int,
         scenario) -> list[dict]:  # fmt: skip
    events = generate_workload(n_interactions, seed=n_interactions, start=PAST_START)
    produce_json(kafka_bootstrap, topic_names.events, events, key=lambda e: e["interaction_id"])
    expected = replay_records(events)
    # windows with valid and invalid calls together: n_tool_calls is not n_invalid_tool_calls
    assert any(r["n_tool_calls"] > r["n_invalid_tool_calls"] > 0 for r in expected.values())
    reader = TopicReader(kafka_bootstrap, topic_names.rewards)
    workers = Workers(kafka_bootstrap, topic_names, tmp_path)
    try:
        scenario(workers, reader, len(expected))
        wait_until_equal(reader, expected, workers, timeout=420)
    finally:
        workers.stop_all()
        reader.close()
    return events


def test_stream_equals_batch_over_100k_events(kafka_bootstrap, topic_names, tmp_path) -> None:
    events = _run(
        kafka_bootstrap,
        topic_names,
        tmp_path,
        10_300,
        lambda workers, reader, n: workers.start("w0"),
    )
    assert len(events) >= 100_000
    assert len({e["interaction_id"] for e in events}) >= 10_000


def test_sigkill_three_times_and_restart(kafka_bootstrap, topic_names, tmp_path) -> None:
    rng = random.Random(7)

    def scenario(workers: Workers, reader: TopicReader, n: int) -> None:
        worker = workers.start("w0")
        for kill in range(4):  # kill once this run made some progress, at a random point after
            wait_for_records(reader, len(reader.messages) + 1, timeout=60)
            time.sleep(rng.uniform(0.5, 4.0))
            if kill == 1:  # the worker alone: its supervisor starts another
                workers.kill_worker_only(worker)
                continue
            workers.kill(worker)
            worker = workers.start("w0")

    _run(kafka_bootstrap, topic_names, tmp_path, 3000, scenario)


def test_a_clean_stop_keeps_the_local_store_and_goes_on(kafka_bootstrap, topic_names,
                                                         tmp_path) -> None:  # fmt: skip
    """SIGTERM mid-stream: the batch in flight finishes, the last writes are flushed, the clean
    marker is left, and the next start resumes from the local store and committed offsets."""
    from streams.clean_stop import CLEAN_MARKER

    def scenario(workers: Workers, reader: TopicReader, n: int) -> None:
        worker = workers.start("w0")
        wait_for_records(reader, n // 4)
        os.killpg(worker.pid, signal.SIGTERM)
        assert worker.wait(60) == 0, workers.logs()
        assert (tmp_path / "w0" / CLEAN_MARKER).exists(), workers.logs()
        workers.start("w0")

    _run(kafka_bootstrap, topic_names, tmp_path, 3000, scenario)


def test_two_workers_share_partitions_and_one_dies(kafka_bootstrap, topic_names,
                                                   tmp_path) -> None:  # fmt: skip
    def scenario(workers: Workers, reader: TopicReader, n: int) -> None:
        first = workers.start("w0", *STORE)
        workers.start("w1", *STORE)
        wait_for_records(reader, n // 3)
        workers.kill(first)

    _run(kafka_bootstrap, topic_names, tmp_path, 3000, scenario)


def test_garbage_goes_to_the_dlq_and_the_worker_goes_on(kafka_bootstrap, topic_names,
                                                        tmp_path) -> None:  # fmt: skip
    events = generate_workload(150, seed=5, start=PAST_START)
    valid = events[0]
    garbage = [
        (b"i-x", b"{not json"),
        (b"i-x", b"[1, 2]"),
        (valid["interaction_id"].encode(), orjson.dumps({**valid, "type": "no.such.type"})),
        (
            valid["interaction_id"].encode(),
            orjson.dumps({k: v for k, v in valid.items() if k != "received_at"}),
        ),
        (b"another-key", orjson.dumps(valid)),
        (None, b"\xff\xfe not utf-8"),
    ]
    reasons = [
        "not_json",
        "not_object",
        "unknown_type",
        "missing_field",
        "key_mismatch",
        "not_json",
    ]
    mixed: list = [(e["interaction_id"].encode(), orjson.dumps(e)) for e in events]
    for i, item in enumerate(garbage):
        mixed.insert(len(mixed) * (i + 1) // (len(garbage) + 1), item)
    from confluent_kafka import Producer

    producer = Producer(client(kafka_bootstrap, **{"enable.idempotence": True}))
    for key, value in mixed:
        producer.produce(topic_names.events, key=key, value=value)
    assert producer.flush(30) == 0
    expected = replay_records(events)
    reader = TopicReader(kafka_bootstrap, topic_names.rewards)
    dlq = TopicReader(kafka_bootstrap, topic_names.dlq)
    workers = Workers(kafka_bootstrap, topic_names, tmp_path)
    port = free_port_block(1)
    try:
        workers.start("w0", "--metrics-port", str(port))
        wait_until_equal(reader, expected, workers, timeout=300)
        dlq.poll(2)
        metrics = _scrape(port)
        # Faust commits what the join acked: in the end every message of every partition.
        committed = _wait_committed(kafka_bootstrap, topic_names, len(mixed))
    finally:
        workers.stop_all()
        reader.close()
        dlq.close()
    got = sorted((m.value(), dict(m.headers())["rtrl.reason"].decode()) for m in dlq.messages)
    assert got == sorted(
        (value, reason) for (_, value), reason in zip(garbage, reasons, strict=True)
    )
    assert metrics["rtrl_stream_events_total"] == len(mixed)
    assert metrics['rtrl_stream_dlq_total{reason="not_json"}'] == 2
    assert metrics['rtrl_stream_dlq_total{reason="key_mismatch"}'] == 1
    assert metrics["rtrl_stream_records_total"] == len(reader.messages)
    lags = {k: v for k, v in metrics.items() if k.startswith("rtrl_stream_lag{")}
    assert len(lags) == JOIN_PARTITIONS and set(lags.values()) == {0}  # all read, every partition
    assert metrics["process_resident_memory_bytes"] > 50 * 2**20  # the worker's own process
    assert sum(committed.values()) == len(mixed), committed


def _wait_committed(bootstrap: str, names: TopicNames, total: int) -> dict[int, int]:
    """The worker group's committed offsets of telemetry.events, once they sum to ``total``
    (or after 60 s)."""
    from confluent_kafka import ConsumerGroupTopicPartitions
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(client(bootstrap))
    group = f"rtrl-stream-{names.prefix}".rstrip("-.")
    deadline = time.monotonic() + 60
    while True:
        request = [ConsumerGroupTopicPartitions(group)]
        result = admin.list_consumer_group_offsets(request)[group].result(30)
        committed = {
            tp.partition: tp.offset
            for tp in result.topic_partitions
            if tp.topic == names.events and tp.offset >= 0
        }
        if sum(committed.values()) >= total or time.monotonic() > deadline:
            return committed
        time.sleep(1)


def _scrape(port: int) -> dict[str, float]:
    """The worker's /metrics as {'name{labels}': value} (once it reported its first tick)."""
    import httpx
    from prometheus_client.parser import text_string_to_metric_families

    deadline = time.monotonic() + 30
    while True:
        try:
            text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
            break
        except httpx.HTTPError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
            out[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
    return out
