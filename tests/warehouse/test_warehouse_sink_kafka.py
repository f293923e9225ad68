"""The sink on a real broker: killed with SIGKILL mid-stream, restarted, nothing lost or doubled."""

from __future__ import annotations

import duckdb

from tests.support.kafka import produce_json
from tests.support.warehouse import records_and_events
from tests.warehouse.support import kill_then_rerun_sink
from warehouse.catalog import build_catalog, check_models
from warehouse.store import Store


def test_sink_killed_mid_stream_lands_every_record_exactly_once(kafka_bootstrap, topic_names,
                                                                 tmp_path):  # fmt: skip
    records, events = records_and_events(600, seed=3)
    # Every fifth interaction is corrected once: revision 1 must win in the mart.
    revised = [dict(r, revision=1, n_late=r["n_late"] + 1) for r in records[::5]]
    by_id = lambda v: v["interaction_id"]  # noqa: E731
    produce_json(kafka_bootstrap, topic_names.events, events, key=by_id)
    produce_json(kafka_bootstrap, topic_names.rewards, records, key=by_id)
    produce_json(kafka_bootstrap, topic_names.rewards, revised, key=by_id)
    root = tmp_path / "wh"
    prefix = topic_names.prefix

    # Small flushes, so that the kill lands between a file and its commit more than once.
    kill_then_rerun_sink(kafka_bootstrap, prefix, root, "events", files=15, max_rows=40)
    store = Store(str(root))

    db = build_catalog(store)
    con = duckdb.connect(db, read_only=True)
    try:
        # every consumed message is in exactly one file ...
        assert con.execute("SELECT count(*) FROM stg_rewards").fetchone()[0] == (
            len(records) + len(revised)
        )
        assert con.execute("SELECT count(*) FROM stg_events").fetchone()[0] == len(events)
        # ... and every reward record is in the mart exactly once, at its latest revision.
        got = dict(con.execute("SELECT interaction_id, revision FROM rewards").fetchall())
        want = {r["interaction_id"]: 0 for r in records} | {r["interaction_id"]: 1 for r in revised}
        assert got == want
        assert list(check_models(con)) == []
    finally:
        con.close()


def test_fixture_through_the_broker_report_batches_and_forget(kafka_bootstrap, topic_names,
                                                              tmp_path):  # fmt: skip
    """The whole warehouse on the real broker: sink, A/B report, gated batches announced on
    the batches topic, and forget."""
    from datetime import UTC, datetime

    import orjson

    from infra.topics import TopicNames
    from tests.support.kafka import drain
    from tests.warehouse.support import (
        assert_matches_expected,
        fixture_events,
        fixture_records,
        rows_mentioning,
    )
    from warehouse.batches import build_batches, publish
    from warehouse.forget import forget
    from warehouse.report import ab_report
    from warehouse.sink import Sink, SinkConfig

    by_id = lambda v: v["interaction_id"]  # noqa: E731
    records = fixture_records()
    n1 = next(r for r in records if r["interaction_id"] == "N1")
    # outside the experiment, alone on its checkpoint, with a reward no config can give
    records.append(dict(n1, interaction_id="BAD1", checkpoint_id="ckpt-bad", reward=40.0))
    produce_json(kafka_bootstrap, topic_names.events, fixture_events(), key=by_id)
    produce_json(kafka_bootstrap, topic_names.rewards, records, key=by_id)
    rollouts = [{"interaction_id": r["interaction_id"], "checkpoint_id": r["checkpoint_id"],
                 "completion_token_ids": [7, 8]} for r in records]  # fmt: skip
    # an agent run: a second call of one interaction, published after the first
    run = next(r for r in records if r["checkpoint_id"] == "ckpt-a" and r["status"] == "scored")
    first = records.index(run)
    turn = {"call_id": "c1", "parent_call_id": None, "segment": 0, "prefix_len": 0,
            "broken_calls": 1}  # fmt: skip
    rollouts[first] = {**rollouts[first], "prompt_ids": [1, 2], "completion_ids": [7, 8],
                       "turn": turn}  # fmt: skip
    rollouts.append({**rollouts[first], "completion_token_ids": [9], "prompt_ids": [1, 2, 7, 8, 5],
                     "completion_ids": [9], "turn": {**turn, "call_id": "c2",
                     "parent_call_id": "c1", "prefix_len": 4, "broken_calls": 0}})  # fmt: skip
    produce_json(kafka_bootstrap, topic_names.rollouts, rollouts, key=by_id)
    store = Store(str(tmp_path / "wh"))
    config = SinkConfig(
        bootstrap=kafka_bootstrap,
        root=store.root,
        topics=TopicNames(topic_names.prefix),
        group_id="e2e",
        once=True,
    )
    sink = Sink(config, store)
    stats = sink.run()
    assert stats.messages == len(fixture_events()) + 2 * len(records) + 1
    assert stats.files > 0 and stats.flushes >= 1
    sample = sink.metrics.registry.get_sample_value
    assert sample("rtrl_sink_consumed_total", {"dataset": "events"}) == len(fixture_events())
    assert sample("rtrl_sink_landed_total", {"dataset": "rewards"}) == len(records)
    assert sample("rtrl_sink_landed_total", {"dataset": "rollouts"}) == len(records) + 1
    lags = [
        s.value
        for m in sink.metrics.registry.collect()
        if m.name == "rtrl_sink_lag"
        for s in m.samples
    ]
    assert lags and set(lags) == {0}  # everything landed

    assert_matches_expected(ab_report(store, "exp-fixture", refresh=True))

    entries = build_batches(store, now=datetime(2026, 12, 1, tzinfo=UTC))
    offered = [e for e in entries if e.offered]
    assert {e.checkpoint_id for e in entries if not e.offered} == {"ckpt-bad"}  # quarantined
    assert {e.checkpoint_id for e in offered} == {"ckpt-a", "ckpt-b"}
    assert offered and publish(kafka_bootstrap, topic_names.batches, entries) == len(offered)
    announced = drain(kafka_bootstrap, topic_names.batches, expected=len(offered), timeout=30)
    assert {orjson.loads(m.value())["batch_id"] for m in announced} == {e.batch_id for e in offered}
    batch_rows = [row for e in offered for row in store.read_parquet(e.files[0]).to_dicts()]
    assert "P1" not in {r["interaction_id"] for r in batch_rows}  # privacy mode never batched
    assert all(r["rollout_json"] for r in batch_rows)
    assert all(len(r["trajectory_json"]) == (r["interaction_id"] == run["interaction_id"]) + 1
               for r in batch_rows)  # fmt: skip
    (agent_row,) = [r for r in batch_rows if r["interaction_id"] == run["interaction_id"]]
    calls = [orjson.loads(raw)["completion_token_ids"] for raw in agent_row["trajectory_json"]]
    assert calls == [[7, 8], [9]] and agent_row["rollout_json"] == agent_row["trajectory_json"][1]

    with duckdb.connect(str(tmp_path / "wh" / "warehouse.duckdb"), read_only=True) as con:
        turns = con.sql("SELECT call_id, parent_call_id, segment, prefix_len, broken_calls, "
                        "prompt_tokens, completion_tokens FROM stg_turns ORDER BY call_id"
                        ).fetchall()  # fmt: skip
    assert turns == [("c1", None, 0, 0, 1, 2, 2), ("c2", "c1", 0, 4, 0, 5, 1)]

    forget(store, "org-1", "uc3")
    assert rows_mentioning(store, str(tmp_path / "wh" / "warehouse.duckdb"),
                           {"uc3", "C3", "C4"}) == []  # fmt: skip
