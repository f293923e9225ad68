"""Collector logic without a broker: body decoding, batch planning, keys, rate limits, CLI."""

from __future__ import annotations

import argparse
import gzip
import sqlite3
import threading
from pathlib import Path

import orjson
import pytest

from infra.api_keys import KeyStore, hash_key
from ingest.collector.batch import BatchReason, BatchRefused, decode_body, plan_batch
from ingest.collector.cli import register_collector
from ingest.collector.ratelimit import RateLimiter
from ingest.contract import MAX_EVENT_BYTES
from tests.support.collector import ORG, OTHER_ORG, valid_event

RECEIVED = "2026-11-30T02:23:05.123456Z"


def plan(events: list, max_events: int = 100):
    return plan_batch(events, ORG, RECEIVED, "ev", "dlq", max_events)


def test_valid_events_get_received_at_and_their_interaction_as_key() -> None:
    event = valid_event(ts="2026-11-30T03:23:05.1+01:00")
    result = plan([event])
    assert result.accepted == 1 and result.results[0]["status"] == 202
    record = result.records[0]
    written = orjson.loads(record.value)
    assert (record.topic, record.key) == ("ev", event["interaction_id"].encode())
    assert written["received_at"] == RECEIVED and written["ts"] == "2026-11-30T02:23:05.100000Z"
    assert written["event_id"] == event["event_id"]


def test_each_invalid_event_goes_to_the_dlq_with_its_reason_alone() -> None:
    good, foreign = valid_event(), valid_event(org_id=OTHER_ORG)
    events = [
        good,
        {**valid_event(), "typo": 1},
        foreign,
        "text",
        valid_event(received_at=RECEIVED),
    ]
    result = plan(events)
    assert result.accepted == 1
    reasons = [(r["index"], r["status"], r.get("reason")) for r in result.results]
    assert reasons == [
        (0, 202, None),
        (1, 400, "unknown_field"),
        (2, 403, "tenant_mismatch"),
        (3, 400, "not_object"),
        (4, 400, "forbidden_field"),
    ]
    dlq = [orjson.loads(r.value) for r in result.records if r.topic == "dlq"]
    assert [d["reason"] for d in dlq] == [
        "unknown_field",
        "tenant_mismatch",
        "not_object",
        "forbidden_field",
    ]
    assert dlq[1]["raw"] == foreign and dlq[1]["org_id"] == ORG
    assert all(d["received_at"] == RECEIVED and "detail" in d and "field" in d for d in dlq)
    assert result.results[2]["event_id"] == foreign["event_id"]


def test_too_many_events_refuse_the_batch() -> None:
    with pytest.raises(BatchRefused) as refused:
        plan([valid_event()] * 3, max_events=2)
    assert (refused.value.status, refused.value.reason) == (413, BatchReason.too_many_events)


@pytest.mark.parametrize(
    "body, encoding, status, reason",
    [
        (b"not json", None, 400, BatchReason.not_json),
        (b'{"evts": []}', None, 400, BatchReason.bad_batch),
        (b'[{"events": []}]', None, 400, BatchReason.bad_batch),
        (b'{"events": []}', "br", 415, BatchReason.unsupported_encoding),
        (b"\x1f\x8b garbage", "gzip", 400, BatchReason.bad_encoding),
        (gzip.compress(b'{"events": []}', mtime=0)[:-6], "gzip", 400, BatchReason.bad_encoding),
        (
            gzip.compress(b'{"events": [' + b"0," * 200 + b"0]}", mtime=0),
            "gzip",
            413,
            BatchReason.body_too_large,
        ),
    ],
    # Explicit ids: pytest-xdist needs every worker to collect the same names, and a gzip
    # header carries the time it was written.
    ids=[
        "not-json",
        "no-events-key",
        "not-an-object",
        "brotli",
        "gzip-garbage",
        "gzip-truncated",
        "gzip-bomb",
    ],
)
def test_malformed_bodies_are_refused_with_a_reason(
    body: bytes, encoding: str | None, status: int, reason: BatchReason
) -> None:
    with pytest.raises(BatchRefused) as refused:
        decode_body(body, encoding, max_bytes=300)
    assert (refused.value.status, refused.value.reason) == (status, reason)


def test_gzip_bodies_are_accepted() -> None:
    assert [bytes(e) for e in decode_body(gzip.compress(b'{"events": [1]}'), "GZIP", 300)] == [b"1"]


def test_encoded_events_are_planned_exactly_as_parsed_ones() -> None:
    """The collector's path (each event still encoded) and the parsed path agree event by event:
    the same results, the same records, the same DLQ entries."""
    events = [
        valid_event(ts="2026-11-30T03:23:05.1+01:00"),
        {**valid_event(), "typo": 1},
        valid_event(org_id=OTHER_ORG),
        "text",
        valid_event(received_at=RECEIVED),
        {**valid_event(), "payload": {"mode": "agent", "x": [1, {"y": None}]}},
    ]
    body = orjson.dumps({"events": events})
    encoded = plan(decode_body(body, None, max_bytes=1 << 20))
    parsed = plan(orjson.loads(body)["events"])
    assert encoded.results == parsed.results and encoded.accepted == parsed.accepted == 1
    assert [(r.topic, r.key, orjson.loads(r.value)) for r in encoded.records] == [
        (r.topic, r.key, orjson.loads(r.value)) for r in parsed.records
    ]


def test_an_event_no_json_parser_reads_is_rejected_alone() -> None:
    body = b'{"events": [1e999, ' + orjson.dumps(valid_event()) + b"]}"
    result = plan(decode_body(body, None, max_bytes=1 << 20))
    assert result.accepted == 1 and result.results[0]["reason"] == "not_json"
    dlq = orjson.loads(next(r.value for r in result.records if r.topic == "dlq"))
    assert dlq["raw"] == "1e999"


def test_an_oversized_event_is_rejected_as_too_large() -> None:
    big = {**valid_event(), "padding": "a" * MAX_EVENT_BYTES}
    body = orjson.dumps({"events": [big, valid_event()]})
    result = plan(decode_body(body, None, max_bytes=1 << 20))
    assert [r.get("reason") for r in result.results] == ["too_large", None]


def test_keys_are_stored_hashed_and_bound_to_a_tenant(tmp_path: Path) -> None:
    store = KeyStore(tmp_path / "keys.sqlite")
    key = store.create(ORG)
    assert key.startswith("rtrl_") and len(key) > 40
    key_id, tenant = store.lookup(key) or ("", "")
    assert tenant == ORG and key_id == hash_key(key)
    assert store.lookup(key[:-1] + ("A" if key[-1] != "A" else "B")) is None
    assert store.lookup("") is None and store.lookup("Bearer x") is None
    assert store.revoke(key) and store.lookup(key) is None
    store.close()
    rows = sqlite3.connect(tmp_path / "keys.sqlite").execute("SELECT * FROM api_keys").fetchall()
    assert key not in repr(rows) and hash_key(key) in repr(rows)


def test_a_new_key_file_opens_while_another_process_holds_its_lock(tmp_path: Path) -> None:
    """The collector's workers open a new key file at once: the second finds the first's lock
    while SQLite switches the file to WAL, which it does without waiting (one start in about a
    hundred stopped the collector with "database is locked")."""
    path = tmp_path / "keys.sqlite"
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("CREATE TABLE t (a)")
    other.execute("BEGIN IMMEDIATE")  # a writer's lock on a file not yet in WAL mode
    threading.Timer(0.3, lambda: other.execute("COMMIT")).start()
    store = KeyStore(path)
    key = store.create(ORG)
    assert store.lookup(key) == (hash_key(key), ORG)
    store.close()
    other.close()
    with sqlite3.connect(path) as fresh:
        assert fresh.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_rate_limit_is_per_key() -> None:
    now = [0.0]
    limiter = RateLimiter(rate=10.0, burst=2, clock=lambda: now[0])
    assert [limiter.check("a") for _ in range(3)] == [None, None, pytest.approx(0.1)]
    assert limiter.check("b") is None
    now[0] = 0.1
    assert limiter.check("a") is None


def test_keys_create_prints_a_key_the_store_knows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = argparse.ArgumentParser()
    register_collector(parser.add_subparsers())
    db = tmp_path / "k.sqlite"
    args = parser.parse_args(["keys", "create", "--org", ORG, "--key-db", str(db)])
    assert args.func(args) == 0
    key = capsys.readouterr().out.strip()
    store = KeyStore(db)
    assert store.lookup(key) is not None
    store.close()
    bad = parser.parse_args(["collector", "--port", "99999"])
    assert bad.func(bad) == 2


def test_keys_are_listed_by_id_and_revoked_by_id(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = argparse.ArgumentParser()
    register_collector(parser.add_subparsers())
    db = ["--key-db", str(tmp_path / "k.sqlite")]

    def rtrl(*argv: str) -> tuple[int, str, str]:
        args = parser.parse_args([*argv])
        code = args.func(args)
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    _, leaked, told = rtrl("keys", "create", "--org", ORG, *db)
    _, kept, _ = rtrl("keys", "create", "--org", OTHER_ORG, *db)
    leaked_id = hash_key(leaked.strip())[:12]
    assert leaked_id in told  # create names the id it will be listed by
    code, listing, _ = rtrl("keys", "list", *db)
    assert code == 0 and leaked_id in listing and hash_key(kept.strip())[:12] in listing
    assert leaked.strip() not in listing and kept.strip() not in listing
    assert rtrl("keys", "list", "--org", OTHER_ORG, *db)[1].count("active") == 1

    assert rtrl("keys", "revoke", leaked_id[:6], *db)[0] == 2  # too short to be sure
    assert rtrl("keys", "revoke", "not-hex-at-all", *db)[0] == 2
    assert (
        rtrl("keys", "revoke", "0" * 12 if not leaked_id.startswith("0") else "f" * 12, *db)[0] == 2
    )  # no such key
    code, out, _ = rtrl("keys", "revoke", leaked_id[:8], *db)
    assert code == 0 and leaked_id in out
    store = KeyStore(tmp_path / "k.sqlite")
    try:
        assert store.lookup(leaked.strip()) is None and store.lookup(kept.strip()) is not None
    finally:
        store.close()
    listing = rtrl("keys", "list", *db)[1]
    assert f"{leaked_id}" in listing and "revoked" in listing and "active" in listing


def test_the_collector_needs_at_least_one_worker() -> None:
    from ingest.collector.config import CollectorConfig

    assert CollectorConfig(port=0, workers=2).workers == 2
    with pytest.raises(ValueError, match="workers must be >= 1"):
        CollectorConfig(port=0, workers=0)


def test_every_settings_field_is_an_option_of_its_command() -> None:
    from ingest.collector.cli import (
        COLLECTOR_OPTIONS,
        CREATE_OPTIONS,
        LIST_OPTIONS,
        REVOKE_OPTIONS,
    )
    from tests.support.settings_options import assert_every_field_is_an_option, subcommand

    for names, options in (
        (("collector",), COLLECTOR_OPTIONS),
        (("keys", "create"), CREATE_OPTIONS),
        (("keys", "list"), LIST_OPTIONS),
        (("keys", "revoke"), REVOKE_OPTIONS),
    ):
        assert_every_field_is_an_option(subcommand(*names), options)
