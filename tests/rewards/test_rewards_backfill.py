"""Backfill: two reward versions over the same events, compared per checkpoint."""

from __future__ import annotations

import argparse
import json
from xml.etree import ElementTree

import pytest

from rewards import cli
from rewards.backfill import ALL_CHECKPOINTS, backfill_files, format_table
from rewards.backfill_report import write_report
from rewards.config import RewardConfig
from rewards.eventio import read_events
from rewards.workload import generate_workload, write_jsonl, write_parquet


@pytest.fixture(scope="module")
def event_files(tmp_path_factory):
    events = generate_workload(600, seed=21)
    folder = tmp_path_factory.mktemp("backfill")
    write_jsonl(events[:3000], folder / "a.jsonl")
    write_parquet(events[3000:], folder / "b.parquet")
    return [folder / "a.jsonl", folder / "b.parquet"]


def test_same_config_moves_nothing(event_files):
    result = backfill_files(event_files, RewardConfig(), RewardConfig())
    for stat in ("mean", "p10", "p50", "p90", "censored_share"):
        assert result.comparison[f"delta_{stat}"].abs().max() == 0.0
    assert result.old_records.equals(result.new_records)


def test_harsher_rejection_lowers_every_checkpoints_mean(event_files, tmp_path):
    result = backfill_files(event_files, RewardConfig(), RewardConfig(reject=-1.0))
    comparison = result.comparison
    assert (comparison["delta_mean"] < 0).all()
    assert (comparison["delta_censored_share"] == 0).all()
    per_checkpoint = comparison.filter(comparison["checkpoint_id"] != ALL_CHECKPOINTS)
    overall = comparison.filter(comparison["checkpoint_id"] == ALL_CHECKPOINTS)
    assert per_checkpoint["n"].sum() == overall["n"][0] == result.old_records.height
    assert result.new_version == RewardConfig(reject=-1.0).reward_version
    assert result.new_version in format_table(result)

    csv_path, json_path, svg_path = write_report(result, tmp_path)
    assert csv_path.read_text().startswith("checkpoint_id,n,")
    svg = ElementTree.parse(svg_path).getroot()  # well-formed SVG
    texts = " ".join(t for t in svg.itertext())
    assert ALL_CHECKPOINTS in texts and result.new_version in texts
    busiest = per_checkpoint.sort("n", descending=True)["checkpoint_id"][0]
    assert busiest in texts
    old_mean = overall["old_mean"][0]
    assert f"mean {old_mean:.3f} -> {overall['new_mean'][0]:.3f}" in texts
    document = json.loads(json_path.read_text())
    assert document["old_version"] == RewardConfig().reward_version
    assert len(document["checkpoints"]) == comparison.height


def test_cli_backfill_prints_the_table_and_writes_the_report(event_files, tmp_path, capsys):
    (tmp_path / "old.json").write_text("{}")
    (tmp_path / "new.toml").write_text("reject = -1.0\n")
    parser = argparse.ArgumentParser()
    cli.register(parser.add_subparsers())
    args = parser.parse_args(["backfill", "--events", *map(str, event_files),
                              "--old-config", str(tmp_path / "old.json"),
                              "--new-config", str(tmp_path / "new.toml"),
                              "--out", str(tmp_path / "report")])  # fmt: skip
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert RewardConfig(reject=-1.0).reward_version in out and "ckpt-0001" in out
    assert (tmp_path / "report" / "backfill.csv").exists()


def test_cli_workload_writes_events(tmp_path):
    parser = argparse.ArgumentParser()
    cli.register(parser.add_subparsers())
    for name in ("w.jsonl", "w.parquet"):
        args = parser.parse_args(["workload", "--interactions", "20", "--seed", "2",
                                  "--out", str(tmp_path / name)])  # fmt: skip
        assert args.func(args) == 0
    assert read_events(tmp_path / "w.jsonl").equals(read_events(tmp_path / "w.parquet"))
