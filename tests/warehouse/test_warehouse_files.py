"""Files: what the encoder writes, atomic writes on a disk and on an fsspec URL, compaction."""

from __future__ import annotations

import orjson
import pytest

from tests.support.warehouse import land, records_and_events
from warehouse.catalog import build_into, check_models, connect
from warehouse.compact import compact
from warehouse.encode import Forgotten, Message, encode
from warehouse.layout import PartFile, parse_part
from warehouse.store import Store


def _messages(values: list[dict | None], first: int = 0) -> list[Message]:
    return [Message(first + i, b"k", None if v is None else orjson.dumps(v), 1_700_000_000_000)
            for i, v in enumerate(values)]  # fmt: skip


def test_rewards_are_partitioned_by_date_and_checkpoint_and_tombstones_dropped():
    records, _ = records_and_events(40, seed=2)
    records[0]["checkpoint_id"] = "team/a=b"
    out = encode("rewards", 3, _messages([*records, None]))
    assert sum(f.height for f in out.values()) == len(records)
    assert "rewards/date=2026-11-30/checkpoint=team%2Fa%3Db" in out
    frame = next(iter(out.values()))
    assert {"_partition", "_offset", "t_open", "event_ids"} <= set(frame.columns)
    assert frame["_partition"].unique().to_list() == [3]


def test_privacy_mode_events_are_archived_without_user():
    _, events = records_and_events(60, seed=4, p_privacy_user=0.5)
    out = encode("events", 0, _messages(events))
    frame = next(iter(out.values()))
    private = frame.filter(frame["privacy_mode"].fill_null(False))
    assert private.height > 0 and private["user_id"].null_count() == private.height
    assert frame.filter(~frame["privacy_mode"].fill_null(False))["user_id"].null_count() == 0


def test_forgotten_users_are_dropped_by_the_encoder():
    records, _ = records_and_events(30, seed=6)
    user = records[0]["user_id"]
    out = encode("rewards", 0, _messages(records), Forgotten(frozenset({user})))
    assert all(user not in f["user_id"].to_list() for f in out.values())


@pytest.mark.parametrize("root", ["local", "memory://wh-test"])
def test_store_writes_atomically_and_the_catalog_reads_any_fsspec_root(tmp_path, root):
    store = Store(str(tmp_path / "wh") if root == "local" else root)
    records, events = records_and_events(50, seed=8)
    land(store, "rewards", records)
    land(store, "events", events)
    land(store, "rewards", records[:5], first_offset=50)
    names = list(store.files(""))
    assert names and all(parse_part(n) for n in names)
    if root == "local":  # no temporary file is left next to the data
        assert not [p for p in (tmp_path / "wh").rglob("*") if p.name.startswith(".")]
    con = connect(store)
    try:
        build_into(con, store)
        assert con.execute("SELECT count(*) FROM rewards").fetchone()[0] == len(records)
        assert list(check_models(con)) == []
    finally:
        con.close()
        if root != "local":
            store.fs.rm(store.root, recursive=True)


def test_compaction_merges_committed_files_only_and_keeps_every_row(tmp_path):
    store = Store(str(tmp_path))
    records, _ = records_and_events(90, seed=12)
    for i in range(0, 90, 10):  # nine flushes of partition 0
        land(store, "rewards", records[i : i + 10], first_offset=i)
    before = {rel: part for rel, part in store.parts("rewards")}
    rows = sum(store.read_parquet(r).height for r in before)

    compact(store, {("rewards", 0): 60})  # offsets 60.. are not committed yet
    after = {part for _, part in store.parts("rewards")}
    assert all(p.first >= 60 or p.last < 60 for p in after)
    assert {p for p in after if p.first >= 60} == {p for p in before.values() if p.first >= 60}
    assert len([p for p in after if p.last < 60]) < len([p for p in before.values()
                                                         if p.last < 60])  # fmt: skip
    assert sum(store.read_parquet(r).height for r, _ in store.parts("rewards")) == rows

    # An interrupted compaction leaves inputs the merged file covers: they are removed.
    merged_rel, merged = next((r, p) for r, p in store.parts("rewards") if p.last < 60)
    land(store, "rewards", records[:10], first_offset=0)
    assert PartFile(merged.folder, 0, 0, 9) in {p for _, p in store.parts("rewards")}
    compact(store, {("rewards", 0): 60})
    assert PartFile(merged.folder, 0, 0, 9) not in {p for _, p in store.parts("rewards")}
    assert store.exists(merged_rel)


def test_pretty_printed_json_values_are_parsed_too():
    records, _ = records_and_events(5, seed=3)
    values = [orjson.dumps(r, option=orjson.OPT_INDENT_2) for r in records]
    messages = [Message(i, b"k", v, 0) for i, v in enumerate(values)]
    out = encode("rewards", 0, messages)
    got = sorted(i for f in out.values() for i in f["interaction_id"].to_list())
    assert got == sorted(r["interaction_id"] for r in records)


def test_compaction_removes_temporaries_a_crash_left(tmp_path):
    import os
    import time

    store = Store(str(tmp_path))
    records, _ = records_and_events(5, seed=1)
    land(store, "rewards", records)
    folder = tmp_path / next(iter(store.files("rewards"))).rpartition("/")[0]
    old, young = folder / ".part-0-1-2.parquet.aa.tmp", folder / ".part-0-3-4.parquet.bb.tmp"
    for f in (old, young):
        f.write_bytes(b"half a file")
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    compact(store, None)
    assert not old.exists() and young.exists()
