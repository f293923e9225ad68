"""The replay gives, row for row, the records that the reward function gives per interaction."""

from __future__ import annotations

import argparse
from collections import defaultdict

import orjson
import polars as pl
import pytest

from rewards import cli
from rewards.config import RewardConfig
from rewards.eventio import read_events
from rewards.function import compute_record
from rewards.record import (
    RECORD_SCHEMA,
    RewardRecord,
    frame_to_records,
    read_records,
    records_to_frame,
)
from rewards.replay import replay
from rewards.workload import generate_workload, write_jsonl, write_parquet

CONFIG = RewardConfig()


@pytest.fixture(scope="module")
def workload() -> list[dict]:
    return generate_workload(300, seed=11)


@pytest.fixture(scope="module")
def expected(workload) -> dict[str, RewardRecord]:
    by_interaction = defaultdict(list)
    for event in workload:
        by_interaction[event["interaction_id"]].append(event)
    return {i: compute_record(events, CONFIG) for i, events in by_interaction.items()}


def replayed(path) -> dict[str, RewardRecord]:
    frame = replay(read_events(path), CONFIG)
    assert frame.schema == RECORD_SCHEMA
    records = frame_to_records(frame)
    assert len(records) == frame["interaction_id"].n_unique()
    return {r.interaction_id: r for r in records}


def test_the_workload_has_windows_with_valid_and_invalid_tool_calls(expected):
    counts = [(r.n_tool_calls, r.n_invalid_tool_calls) for r in expected.values()]
    assert any(calls > invalid > 0 for calls, invalid in counts)


def test_replay_of_jsonl_equals_the_function_per_interaction(tmp_path, workload, expected):
    write_jsonl(workload, tmp_path / "events.jsonl")
    assert replayed(tmp_path / "events.jsonl") == expected


def test_replay_of_parquet_equals_the_function_per_interaction(tmp_path, workload, expected):
    write_parquet(workload, tmp_path / "events.parquet")
    assert replayed(tmp_path / "events.parquet") == expected


def test_parquet_with_json_string_columns_and_datetime_timestamps(tmp_path, workload, expected):
    frame = pl.DataFrame(
        {
            "event_id": [e["event_id"] for e in workload],
            "type": [e["type"] for e in workload],
            "ts": [e["ts"] for e in workload],
            "received_at": [e["received_at"] for e in workload],
            "interaction_id": [e["interaction_id"] for e in workload],
            "session_id": [e["session_id"] for e in workload],
            "user_id": [e["user_id"] for e in workload],
            "org_id": [e["org_id"] for e in workload],
            "checkpoint_id": [e["checkpoint_id"] for e in workload],
            "privacy_mode": [e.get("privacy_mode") for e in workload],
            "payload": [orjson.dumps(e["payload"]).decode() for e in workload],
            "experiment": [
                orjson.dumps(e["experiment"]).decode() if "experiment" in e else None
                for e in workload
            ],
        }
    ).with_columns(pl.col("received_at").str.to_datetime(time_unit="us", time_zone="UTC"))
    frame.write_parquet(tmp_path / "strings.parquet")
    assert replayed(tmp_path / "strings.parquet") == expected


def test_several_files_make_one_replay(tmp_path, workload, expected):
    half = len(workload) // 2
    write_jsonl(workload[:half], tmp_path / "a.jsonl")
    write_parquet(workload[half:], tmp_path / "b.parquet")
    as_datetimes = pl.read_parquet(tmp_path / "b.parquet").with_columns(
        pl.col("received_at").str.to_datetime(time_unit="us", time_zone="UTC")
    )
    as_datetimes.write_parquet(tmp_path / "b.parquet")  # JSON lines and Datetime columns mix
    frame = replay(read_events([tmp_path / "a.jsonl", tmp_path / "b.parquet"]), CONFIG)
    assert {r.interaction_id: r for r in frame_to_records(frame)} == expected


def test_unknown_file_type_is_refused(tmp_path):
    with pytest.raises(ValueError):
        read_events(tmp_path / "events.csv")


def test_record_json_round_trip_and_format(expected):
    record = next(iter(expected.values()))
    data = record.to_json_dict()
    assert list(data) == list(RECORD_SCHEMA.names())
    assert data["t_open"].endswith("Z") and len(data["t_open"]) == len(
        "2026-11-30T00:00:00.000000Z"
    )
    assert RewardRecord.from_json_dict(orjson.loads(orjson.dumps(data))) == record
    with pytest.raises(ValueError):
        RewardRecord.from_json_dict({**data, "extra": 1})


def test_records_read_back_from_parquet_and_jsonl(tmp_path, expected):
    records = list(expected.values())
    records_to_frame(records).write_parquet(tmp_path / "r.parquet")
    with open(tmp_path / "r.jsonl", "wb") as out:
        out.writelines(orjson.dumps(r.to_json_dict()) + b"\n" for r in records)
    assert frame_to_records(read_records(tmp_path / "r.parquet")) == records
    assert frame_to_records(read_records(tmp_path / "r.jsonl")) == records


def test_cli_replay_writes_one_row_per_interaction(tmp_path, workload, expected):
    write_jsonl(workload, tmp_path / "events.jsonl")
    (tmp_path / "reward.yaml").write_text("reward:\n  reject: -0.75\n")
    parser = argparse.ArgumentParser()
    cli.register(parser.add_subparsers())
    args = parser.parse_args(["replay", "--events", str(tmp_path / "events.jsonl"),
                              "--out", str(tmp_path / "out.parquet"),
                              "--reward-config", str(tmp_path / "reward.yaml")])  # fmt: skip
    assert args.func(args) == 0
    out = pl.read_parquet(tmp_path / "out.parquet")
    assert out.height == len(expected)
    assert out["reward_version"].unique().to_list() == [RewardConfig(reject=-0.75).reward_version]


def test_worker_processes_give_the_same_records(tmp_path, workload):
    write_parquet(workload, tmp_path / "events.parquet")
    events = read_events(tmp_path / "events.parquet")
    assert replay(events, CONFIG, workers=2).equals(replay(events, CONFIG))


def test_events_without_received_at_are_refused(tmp_path, workload):
    write_jsonl([{k: v for k, v in e.items() if k != "received_at"} for e in workload[:5]],
                tmp_path / "raw.jsonl")  # fmt: skip
    with pytest.raises(ValueError, match="received_at"):
        replay(read_events(tmp_path / "raw.jsonl"), CONFIG)


def test_no_events_no_records(tmp_path):
    (tmp_path / "empty.jsonl").write_bytes(b"")
    frame = replay(read_events(tmp_path / "empty.jsonl"), CONFIG)
    assert frame.height == 0 and frame.schema == RECORD_SCHEMA
