"""The DLQ, late events and checkpoint announcements as warehouse tables.

First through the sink's encoder and store without a broker (records built here, landed, the
catalog built, the marts compared with what was sent); then the same data through a real broker
and a sink killed with SIGKILL mid-stream and restarted: each message in the marts exactly once.
"""

from __future__ import annotations

import duckdb
import orjson

from tests.support.kafka import Headers, produce_raw
from tests.support.warehouse import land_messages, records_and_events
from tests.warehouse.support import kill_then_rerun_sink
from warehouse.catalog import build_catalog, check_models
from warehouse.encode import Message
from warehouse.store import Store

Raw = tuple[bytes | None, bytes | None, Headers]  # key, value, headers
TS_MS = 1_764_547_200_000  # 2025-12-01T00:00:00Z


def dlq_records(n: int) -> list[Raw]:
    """Alternately the stream's DLQ record (original bytes, not UTF-8, reason in headers) and the
    collector's (a JSON value with the reason inside, no headers)."""
    out: list[Raw] = []
    for i in range(n):
        if i % 2 == 0:
            raw = b"\xff\xfe{not json " + i.to_bytes(4, "big") + b"\x00\x80"
            source = f"p.telemetry.events/3/{i}".encode()
            headers: Headers = [("rtrl.reason", b"not_json"), ("rtrl.field", b""),
                       ("rtrl.detail", b"bad bytes \xc3\x28"), ("rtrl.stage", b"stream"),
                       ("rtrl.source", source)]  # fmt: skip
            out.append((None, raw, headers))
        else:
            body = {"reason": "missing_field", "field": "type", "detail": "required",
                    "raw": {"event_id": f"e{i}"}, "received_at": "2025-12-01T00:00:00Z",
                    "org_id": "acme"}  # fmt: skip
            out.append((None, orjson.dumps(body), None))
    return out


def late_events(n: int) -> list[Raw]:
    _, events = records_and_events(max(n // 4, 1), seed=1, n_users=4)
    picked = events[:n]
    assert len(picked) == n
    return [(e["interaction_id"].encode(), orjson.dumps(e),
             [("rtrl.arrival", b"late" if i % 3 else b"expired")])
            for i, e in enumerate(picked)]  # fmt: skip


def checkpoint(cid: str, status: str, parent: str | None = None, canary: dict | None = None,
               gate: bool = True) -> bytes:  # fmt: skip
    """A value as checkpoints.store.CheckpointInfo.to_json_dict writes it (fields by name)."""
    offpolicy = {"value": 0.55, "behaviour_mean": 0.5, "ess": 80.0, "kl": 0.1, "n": 100,
                 "lower": 0.01, "level": 0.95, "method": "snis", "resamples": 1000}  # fmt: skip
    evals: dict = {"offpolicy": offpolicy, "alarms": ["invalid tool calls up"]}
    if gate:
        evals["gate"] = {"n": 100.0, "value": 0.55, "behaviour_mean": 0.5, "gain": 0.05,
                         "lower": 0.01, "level": 0.95, "method": "bootstrap-snis",
                         "resamples": 1000.0, "kl": 0.1, "ess": 80.0, "ess_fraction": 0.8,
                         "alarms": 1.0, "eval_alarms": 2.0}  # fmt: skip
    if canary is not None:
        evals["canary"] = canary
    return orjson.dumps({
        "checkpoint_id": cid, "parent": parent, "directory": f"/reg/{cid}", "model": {},
        "weights": {"kind": "base"}, "training": {}, "created_at": "2025-12-01T10:00:00Z",
        "evals": evals, "batches": ["b1", "b2"], "status": status,
        "reasons": ["lower bound below 0"] if status == "rejected" else [],
    })  # fmt: skip


def announcements(n_more: int = 0) -> list[Raw]:
    """c1 rejected then re-announced promoted; c2 a canary rolled back; c3 withdrawn by a
    tombstone; c4 an older checkpoint without gate or canary keys; then ``n_more`` more."""
    canary = {"outcome": "rolled_back", "percent": 10.0, "experiment": "canary-c2"}
    out: list[Raw] = [
        (b"c1", checkpoint("c1", "rejected"), None),
        (b"c2", checkpoint("c2", "promoted", "c1", canary), None),
        (b"c3", checkpoint("c3", "promoted", "c2"), None),
        (b"c1", checkpoint("c1", "promoted", "c0"), None),
        (b"c3", None, None),
        (b"c4", checkpoint("c4", "promoted", gate=False), None),
    ]
    for i in range(n_more):
        cid = f"m{i}"
        out.append((cid.encode(), checkpoint(cid, "rejected" if i % 2 else "promoted"), None))
    return out


def expected_checkpoints(sent: list[Raw]) -> dict[str, str | None]:
    """checkpoint_id -> status of the latest announcement, withdrawn ones left out."""
    latest: dict[str, bytes | None] = {}
    for key, value, _ in sent:
        assert key is not None
        latest[key.decode()] = value
    return {k: orjson.loads(v)["status"] for k, v in latest.items() if v is not None}


def assert_landed(db: str, dlq: list[Raw], late: list[Raw], ckpts: list[Raw]) -> None:
    con = duckdb.connect(db, read_only=True)
    try:
        assert list(check_models(con)) == []
        got = con.execute("SELECT raw_value, reason, stage, source_topic, source_offset, "
                          "headers FROM stg_dlq").fetchall()  # fmt: skip
        assert sorted(r[0] for r in got) == sorted(v or b"" for _, v, _ in dlq)  # byte for byte
        by_value = {r[0]: r for r in got}
        for i, (_, value, headers) in enumerate(dlq):
            row = by_value[value]
            if headers:
                assert row[1:5] == ("not_json", "stream", "p.telemetry.events", i)
                assert [(h["key"], h["value"]) for h in row[5]] == headers
            else:
                assert row[1:4] == ("missing_field", "collector", None)
        reasons = dict(con.execute("SELECT reason, sum(n_records) FROM dlq_reasons "
                                   "GROUP BY ALL").fetchall())  # fmt: skip
        assert reasons == {"not_json": (len(dlq) + 1) // 2, "missing_field": len(dlq) // 2}

        landed_late = con.execute("SELECT event_id, arrival FROM stg_late").fetchall()
        assert sorted(landed_late) == sorted(
            (orjson.loads(v)["event_id"], (dict(h)["rtrl.arrival"] or b"").decode())
            for _, v, h in late if v is not None and h is not None
        )  # fmt: skip

        assert dict(con.execute("SELECT checkpoint_id, status FROM checkpoints").fetchall()) == (
            expected_checkpoints(ckpts))  # fmt: skip
        columns = ("parent", "reasons", "gain", "lower", "level", "method", "n", "ess", "kl",
                   "alarms", "eval_alarms", "canary_outcome", "canary_percent",
                   "canary_experiment")  # fmt: skip
        rows = {r[0]: dict(zip(columns, r[1:], strict=True)) for r in con.execute(
            f"SELECT checkpoint_id, {', '.join(columns)} FROM checkpoints").fetchall()}  # fmt: skip
        assert rows["c1"]["parent"] == "c0" and rows["c1"]["reasons"] == []  # the newer value
        assert rows["c2"] == {"parent": "c1", "reasons": [], "gain": 0.05, "lower": 0.01,
                              "level": 0.95, "method": "bootstrap-snis", "n": 100, "ess": 80.0,
                              "kl": 0.1, "alarms": 1, "eval_alarms": 2,
                              "canary_outcome": "rolled_back", "canary_percent": 10.0,
                              "canary_experiment": "canary-c2"}  # fmt: skip
        c4 = rows["c4"]  # older: figures from evals.offpolicy, alarms counted, no canary keys
        assert abs(c4["gain"] - 0.05) < 1e-12 and (c4["lower"], c4["n"], c4["alarms"]) == (
            0.01, 100, 1)  # fmt: skip
        assert c4["eval_alarms"] is None and c4["canary_outcome"] is None
    finally:
        con.close()


def _messages(raws: list[Raw]) -> list[Message]:
    return [Message(i, k, v, TS_MS, h) for i, (k, v, h) in enumerate(raws)]


def test_side_topics_land_as_tables_and_marts(tmp_path):
    dlq, late, ckpts = dlq_records(6), late_events(9), announcements()
    store = Store(str(tmp_path))
    land_messages(store, "dlq", _messages(dlq))
    land_messages(store, "late", _messages(late), partition=2)
    land_messages(store, "checkpoints", _messages(ckpts))
    assert_landed(build_catalog(store), dlq, late, ckpts)


def test_a_forgotten_user_does_not_stop_the_side_topics():
    """The DLQ and checkpoints name no user: the sink's filter of forgotten users leaves them."""
    from warehouse.encode import Forgotten, encode

    forgotten = Forgotten(frozenset({"u1"}), frozenset({"i1"}))
    for dataset, raws in (("dlq", dlq_records(4)), ("checkpoints", announcements())):
        frames = encode(dataset, 0, _messages(raws), forgotten)
        assert sum(f.height for f in frames.values()) == len(raws), dataset


def test_sink_killed_lands_side_topics_exactly_once(kafka_bootstrap, topic_names, tmp_path):
    dlq, late, ckpts = dlq_records(240), late_events(240), announcements(n_more=120)
    produce_raw(kafka_bootstrap, topic_names.dlq, dlq)
    produce_raw(kafka_bootstrap, topic_names.late, late)
    produce_raw(kafka_bootstrap, topic_names.checkpoints, ckpts)
    root = tmp_path / "wh"
    prefix = topic_names.prefix

    # Small flushes, so that the kill lands between a file and its commit.
    kill_then_rerun_sink(kafka_bootstrap, prefix, root, "dlq", files=4, max_rows=20)
    store = Store(str(root))
    db = build_catalog(store)
    assert_landed(db, dlq, late, ckpts)
    con = duckdb.connect(db, read_only=True)
    try:  # exactly once in the files too, not only in the marts
        for view, n in (("stg_dlq", len(dlq)), ("stg_late", len(late)),
                        ("stg_checkpoints", len(ckpts))):  # fmt: skip
            assert con.execute(f"SELECT count(*), count(DISTINCT (kafka_partition, kafka_offset)) "
                               f"FROM {view}").fetchone() == (n, n), view  # fmt: skip
    finally:
        con.close()


def test_forget_removes_the_users_late_events(tmp_path):
    from tests.warehouse.support import rows_mentioning
    from warehouse.forget import forget

    late = late_events(40)
    events = [orjson.loads(v or b"") for _, v, _ in late]
    user = next(e["user_id"] for e in events if not e.get("privacy_mode"))  # private: no user
    store = Store(str(tmp_path))
    land_messages(store, "late", _messages(late))
    forget(store, next(e["org_id"] for e in events if e["user_id"] == user), user)
    db = build_catalog(store)
    assert rows_mentioning(store, db, {user}) == []
    con = duckdb.connect(db, read_only=True)
    try:
        left = con.execute("SELECT count(*) FROM stg_late").fetchone()
    finally:
        con.close()
    theirs = sum(e["user_id"] == user and not e.get("privacy_mode") for e in events)
    assert left == (len(late) - theirs,) and theirs > 0
