"""Subcommands of the rewards stage: replay, backfill, monitors and workload (their options:
``rewards.cli_options``)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from infra.settings_cli import add_command
from rewards.backfill import backfill_files, format_table
from rewards.cli_options import BACKFILL_OPTIONS, MONITORS_OPTIONS, REPLAY_OPTIONS, WORKLOAD_OPTIONS
from rewards.config import RewardConfig, load_config
from rewards.eventio import read_events, write_jsonl, write_parquet
from rewards.monitors import (
    MonitorThresholds,
    Verdict,
    assess,
    checkpoint_rates,
    compare,
    load_thresholds,
    relative_change,
)
from rewards.record import read_records
from rewards.replay import Progress, replay
from rewards.workload import generate_workload


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``replay``, ``backfill``, ``monitors`` and ``workload``."""
    add_command(
        sub,
        "replay",
        _replay,
        REPLAY_OPTIONS,
        help="recompute reward records from event files",
        description="One reward record per interaction, every window closed at end of input.",
    )
    add_command(
        sub,
        "backfill",
        _backfill,
        BACKFILL_OPTIONS,
        help="compare two reward versions per checkpoint",
        description="Recompute records under two configs; show how each checkpoint's reward moves.",
    )
    add_command(
        sub,
        "monitors",
        _monitors,
        MONITORS_OPTIONS,
        help="reward-hacking monitors of a checkpoint against its parent",
        description="Print behaviour rates of CHECKPOINT and PARENT; exit 1 when an alarm fires.",
    )
    add_command(
        sub,
        "workload",
        _workload,
        WORKLOAD_OPTIONS,
        help="write a seeded synthetic event workload",
        description="Realistic events (late, duplicate, orphan, privacy...) in arrival order.",
    )


def _config(path: Path | None) -> RewardConfig:
    return load_config(path) if path else RewardConfig()


def _stderr_progress() -> Progress:
    started = time.perf_counter()

    def report(n_interactions: int, n_events: int) -> None:
        elapsed = time.perf_counter() - started
        rate = n_events / elapsed if elapsed else 0.0
        print(f"{n_interactions:,} interactions, {n_events:,} events, {rate:,.0f} events/s",
              file=sys.stderr, flush=True)  # fmt: skip

    return report


def _replay(args: argparse.Namespace) -> int:
    options = REPLAY_OPTIONS.read(args)
    config = _config(options.config)
    started = time.perf_counter()
    events = read_events(options.events)
    print(f"read {events.height:,} events in {time.perf_counter() - started:.1f} s",
          file=sys.stderr)  # fmt: skip
    records = replay(events, config, _stderr_progress(), workers=options.workers)
    records.write_parquet(options.out)
    elapsed = time.perf_counter() - started
    print(f"{records.height:,} records ({config.reward_version}) -> {options.out} in "
          f"{elapsed:.1f} s, {events.height / elapsed:,.0f} events/s", file=sys.stderr)  # fmt: skip
    return 0


def _backfill(args: argparse.Namespace) -> int:
    options = BACKFILL_OPTIONS.read(args)
    old, new = load_config(options.old_config), load_config(options.new_config)
    result = backfill_files(options.events, old, new, _stderr_progress())
    print(format_table(result))
    if options.out:
        from rewards.backfill_report import write_report  # matplotlib only for a report

        for path in write_report(result, options.out):
            print(f"wrote {path}", file=sys.stderr)
    return 0


def _monitors(args: argparse.Namespace) -> int:
    options = MONITORS_OPTIONS.read(args)
    thresholds = load_thresholds(options.thresholds) if options.thresholds else MonitorThresholds()
    records = read_records(options.records)
    child = checkpoint_rates(records, options.checkpoint)
    parent = checkpoint_rates(records, options.parent)
    for rates in (child, parent):
        if rates.n_interactions == 0:
            print(f"no records of checkpoint {rates.checkpoint_id!r}", file=sys.stderr)
            return 2
    alarms = {alarm.metric: alarm for alarm in compare(child, parent, thresholds)}
    print(f"{options.checkpoint} ({child.n_interactions:,} interactions) against "
          f"{options.parent} ({parent.n_interactions:,}); alarms at one-sided "
          f"p < {thresholds.alpha:g} over users (Holm)")  # fmt: skip
    print(f"{'metric':<28}{'parent':>10}{'child':>10}{'change':>10}{'p':>8}  status")
    for verdict in assess(child, parent, thresholds):
        value, parent_value = verdict.value, verdict.parent_value
        status = _status(verdict, thresholds)
        change = (
            f"{relative_change(value, parent_value):+.1%}"
            if value is not None and parent_value is not None
            else "-"
        )
        p = "-" if verdict.adjusted_p is None else f"{verdict.adjusted_p:.2g}"
        print(
            f"{verdict.metric:<28}{_rate(parent_value):>10}{_rate(value):>10}{change:>10}"
            f"{p:>8}  {status}"
        )
    for alarm in alarms.values():
        print(f"alarm: {alarm.message}", file=sys.stderr)
    return 1 if alarms else 0


def _status(verdict: Verdict, thresholds: MonitorThresholds) -> str:
    if verdict.status == "alarm":
        return "ALARM"
    if verdict.status == "ok":
        return "ok"
    if verdict.status == "underpowered":
        return (f"quiet, underpowered: {verdict.needed:,} a side to see the threshold's move "
                f"at power {thresholds.power:g}")  # fmt: skip
    floors = f"{thresholds.min_interactions} samples or {thresholds.min_users} users"
    return f"not tested (fewer than {floors} a side, or no value)"


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def _workload(args: argparse.Namespace) -> int:
    options = WORKLOAD_OPTIONS.read(args)
    events = generate_workload(options.interactions, seed=options.seed)
    if options.out.suffix.lower() == ".parquet":
        write_parquet(events, options.out)
    else:
        write_jsonl(events, options.out)
    print(f"{len(events):,} events -> {options.out}", file=sys.stderr)
    return 0
