"""Reward-hacking monitors: rates per checkpoint, alarms against the parent, the CLI's exit code."""

from __future__ import annotations

import argparse
import math

import polars as pl
import pytest

from rewards import cli
from rewards.config import RewardConfig
from rewards.eventio import read_events, write_jsonl
from rewards.monitors import (
    BAD_DIRECTION,
    MetricThreshold,
    MonitorThresholds,
    checkpoint_rates,
    compare,
    load_thresholds,
)
from rewards.replay import replay
from rewards.workload import CheckpointProfile, generate_workload


def records(checkpoint: str, n: int, *, invalid: int = 0, edits: int = 0, censored: int = 0,
            subagents: tuple[int, int] = (0, 0), revision: int = 0) -> pl.DataFrame:  # fmt: skip
    """n records of a checkpoint; the first ``invalid`` have an invalid tool call, and so on."""
    n_subagents, n_unused = subagents
    return pl.DataFrame(
        {
            "interaction_id": [f"{checkpoint}-{i}" for i in range(n)],
            "revision": [revision] * n,
            "checkpoint_id": [checkpoint] * n,
            "status": ["censored" if i < censored else "scored" for i in range(n)],
            "n_edits": [1 if i < edits else 0 for i in range(n)],
            "n_clarifying": [0] * n,
            "n_invalid_tool_calls": [2 if i < invalid else 0 for i in range(n)],
            "n_subagents": [n_subagents if i == 0 else 0 for i in range(n)],
            "n_subagents_unused": [n_unused if i == 0 else 0 for i in range(n)],
        }
    )


def alarms_of(child: pl.DataFrame, parent: pl.DataFrame, thresholds=None) -> list:
    frame = pl.concat([child, parent])
    child_id, parent_id = child["checkpoint_id"][0], parent["checkpoint_id"][0]
    return compare(checkpoint_rates(frame, child_id), checkpoint_rates(frame, parent_id),
                   thresholds or MonitorThresholds())  # fmt: skip


def test_rates_of_a_checkpoint():
    rates = checkpoint_rates(records("c", 400, invalid=40, edits=100, censored=20,
                                     subagents=(10, 4)), "c")  # fmt: skip
    assert rates.n_interactions == 400
    assert rates.value("invalid_tool_call_rate") == 0.1 and rates.value("edit_rate") == 0.25
    assert rates.value("censored_share") == 0.05 and rates.value("subagent_rate") == 1 / 400
    assert rates.value("unused_subagent_share") == 0.4 and rates.value("clarifying_rate") == 0.0
    assert rates.value("tool_call_rate") is None  # records without n_tool_calls


def test_alarm_fires_when_the_invalid_tool_call_rate_doubles():
    alarms = alarms_of(records("child", 1000, invalid=200), records("parent", 1000, invalid=100))
    assert [a.metric for a in alarms] == ["invalid_tool_call_rate"]
    alarm = alarms[0]
    assert (alarm.checkpoint, alarm.parent) == ("child", "parent")
    assert (alarm.parent_value, alarm.value, alarm.change) == (0.1, 0.2, 1.0)
    assert alarm.threshold == MonitorThresholds().invalid_tool_call_rate
    assert "invalid_tool_call_rate" in alarm.message


def test_quiet_when_the_rate_does_not_move_much():
    assert (
        alarms_of(records("child", 1000, invalid=110), records("parent", 1000, invalid=100)) == []
    )


def test_halving_is_no_alarm_unless_both_directions_count():
    child, parent = records("child", 1000, invalid=50), records("parent", 1000, invalid=100)
    assert alarms_of(child, parent) == []  # fewer broken tool calls: better, not an alarm
    both = MonitorThresholds(invalid_tool_call_rate=MetricThreshold(direction="both"))
    assert [a.metric for a in alarms_of(child, parent, both)] == ["invalid_tool_call_rate"]


def test_bad_directions_are_the_default_thresholds():
    assert BAD_DIRECTION == {
        "edit_rate": "down",
        "clarifying_rate": "up",
        "invalid_tool_call_rate": "up",
        "tool_call_rate": "down",
        "tool_calls_per_interaction": "up",
        "unused_subagent_share": "up",
        "censored_share": "up",
    }


def test_samples_under_the_floor_are_not_tested():
    assert alarms_of(records("child", 10, invalid=5), records("parent", 1000, invalid=100)) == []


def test_both_limits_must_be_passed():
    # 0.1 % -> 0.3 %: tripled, but by less than the absolute limit of one point
    assert alarms_of(records("child", 1000, invalid=3), records("parent", 1000, invalid=1)) == []


def test_from_zero_the_change_is_infinite():
    alarms = alarms_of(records("child", 1000, invalid=50), records("parent", 1000))
    assert alarms and math.isinf(alarms[0].change)


def test_latest_revision_of_each_interaction_counts():
    old = records("c", 500, invalid=500)
    new = records("c", 500, invalid=0, revision=1)
    assert checkpoint_rates(pl.concat([new, old]), "c").value("invalid_tool_call_rate") == 0.0


def test_thresholds_from_a_file(tmp_path):
    path = tmp_path / "monitors.toml"
    path.write_text("min_interactions = 10\n[invalid_tool_call_rate]\nrelative = 2.0\n")
    thresholds = load_thresholds(path)
    assert thresholds.min_interactions == 10 and thresholds.invalid_tool_call_rate.relative == 2.0
    assert thresholds.edit_rate == MonitorThresholds().edit_rate


@pytest.fixture(scope="module")
def records_file(tmp_path_factory):
    profiles = (CheckpointProfile("parent"), CheckpointProfile("same"),
                CheckpointProfile("hacky", p_invalid_tool=0.25))  # fmt: skip
    events = generate_workload(2400, seed=3, profiles=profiles)
    path = tmp_path_factory.mktemp("monitors") / "records.parquet"
    write_jsonl(events, path.with_suffix(".jsonl"))
    replay(read_events(path.with_suffix(".jsonl")), RewardConfig()).write_parquet(path)
    return path


def run_cli(*argv: str) -> int:
    parser = argparse.ArgumentParser()
    cli.register(parser.add_subparsers())
    args = parser.parse_args(list(argv))
    return args.func(args)


def test_cli_exits_1_on_alarm_and_0_without(records_file, capsys):
    assert run_cli("monitors", "--records", str(records_file), "--checkpoint", "hacky",
                   "--parent", "parent") == 1  # fmt: skip
    assert "ALARM" in capsys.readouterr().out
    assert run_cli("monitors", "--records", str(records_file), "--checkpoint", "same",
                   "--parent", "parent") == 0  # fmt: skip
    assert run_cli("monitors", "--records", str(records_file), "--checkpoint", "nobody",
                   "--parent", "parent") == 2  # fmt: skip
