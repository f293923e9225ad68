"""The sink across a restart of its broker: messages it holds when the broker goes away are
written, and once the broker is back it takes its partitions again and lands what comes next,
every message once; asked to stop, it stops. Before its offsets were committed on the polling
thread, a commit from the writer thread, waited on by the revoke callback, could hang the sink
for good after such a restart (three of four soak runs)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from infra import broker
from infra.broker_config import ClusterLayout
from infra.kafka_dist import default_cache_root
from infra.topics import TopicNames
from infra.topics_apply import apply_topics
from tests.support.kafka import free_port_block, produce_json
from tests.support.warehouse import records_and_events
from warehouse.catalog import build_catalog
from warehouse.settings import SinkConfig
from warehouse.sink import Sink
from warehouse.store import Store

DOWN_S = 14.0  # past the sink's 10 s session: its partitions are revoked while Kafka is away


@pytest.fixture
def own_broker(tmp_path: Path) -> Iterator[tuple[ClusterLayout, str]]:
    layout = ClusterLayout(tmp_path / "kafka", port=free_port_block(2), nodes=1)
    bootstrap = broker.start(layout, default_cache_root(os.environ))
    try:
        yield layout, bootstrap
    finally:
        broker.stop(layout)


def _landed(store: Store, db: Path) -> int:
    try:
        with duckdb.connect(build_catalog(store, str(db)), read_only=True) as con:
            (n,) = con.execute("SELECT count(DISTINCT interaction_id) FROM stg_rewards").fetchall()[
                0
            ]
        return int(n)
    except (duckdb.Error, OSError):
        return 0


def _until(what: str, ready, timeout_s: float) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout_s
    while not ready():
        assert time.monotonic() < deadline, f"{what} not within {timeout_s:.0f} s"
        time.sleep(0.5)


def test_the_sink_lands_again_after_its_broker_restarts(
    own_broker: tuple[ClusterLayout, str], tmp_path: Path
) -> None:
    layout, bootstrap = own_broker
    names = TopicNames("restart.")
    apply_topics(bootstrap, names, replication=1)
    records, _ = records_and_events(90, seed=9)
    first, held, after = records[:30], records[30:60], records[60:]
    by_id = lambda v: v["interaction_id"]  # noqa: E731
    store, db = Store(str(tmp_path / "wh")), tmp_path / "check.duckdb"
    sink = Sink(SinkConfig(bootstrap=bootstrap, root=store.root, topics=names,
                           group_id="restart", max_seconds=3.0), store)  # fmt: skip
    stop = threading.Event()
    thread = threading.Thread(target=sink.run, kwargs={"should_stop": stop.is_set}, daemon=True)
    thread.start()
    try:
        produce_json(bootstrap, names.rewards, first, key=by_id)
        _until("the first records", lambda: _landed(store, db) == len(first), 60)
        produce_json(bootstrap, names.rewards, held, key=by_id)
        time.sleep(0.5)  # consumed, not yet flushed: held when the broker goes
        broker.stop(layout)
        time.sleep(DOWN_S)
        broker.start(layout, default_cache_root(os.environ))
        produce_json(bootstrap, names.rewards, after, key=by_id)
        _until("every record after the restart",
               lambda: _landed(store, db) == len(records), 120)  # fmt: skip
    finally:
        stop.set()
        thread.join(60)
    assert not thread.is_alive(), "the sink did not stop when asked"
    with duckdb.connect(build_catalog(store, str(db)), read_only=True) as con:
        rows = con.execute(
            "SELECT count(*), count(DISTINCT interaction_id) FROM rewards"
        ).fetchone()
    assert rows == (len(records), len(records))
