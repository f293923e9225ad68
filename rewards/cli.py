"""Subcommands of the rewards stage: replay, backfill, monitors and workload."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from infra.cli import positive_int
from rewards.backfill import backfill_files, format_table
from rewards.config import RewardConfig, load_config
from rewards.eventio import read_events, write_jsonl, write_parquet
from rewards.monitors import (
    METRICS,
    MonitorThresholds,
    checkpoint_rates,
    compare,
    judgeable,
    load_thresholds,
    relative_change,
)
from rewards.record import read_records
from rewards.replay import Progress, replay
from rewards.workload import generate_workload


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``replay``, ``backfill``, ``monitors`` and ``workload``."""
    p = sub.add_parser(
        "replay",
        help="recompute reward records from event files",
        description="One reward record per interaction, every window closed at end of input.",
    )
    p.add_argument("--events", required=True, nargs="+", type=Path, help=".jsonl or .parquet")
    p.add_argument("--out", required=True, type=Path, help="output Parquet file")
    p.add_argument("--config", type=Path, help="reward config (JSON/TOML/YAML); spec defaults")
    p.add_argument(
        "--workers", type=positive_int, default=1, help="processes computing records (1)"
    )
    p.set_defaults(func=_replay)

    p = sub.add_parser(
        "backfill",
        help="compare two reward versions per checkpoint",
        description="Recompute records under two configs; show how each checkpoint's reward moves.",
    )
    p.add_argument("--events", required=True, nargs="+", type=Path, help=".jsonl or .parquet")
    p.add_argument("--old-config", required=True, type=Path, help="the current reward config")
    p.add_argument("--new-config", required=True, type=Path, help="the candidate reward config")
    p.add_argument(
        "--out",
        type=Path,
        help="directory for backfill.csv, backfill.json and backfill.svg (each "
        "checkpoint's reward distribution, old and new)",
    )
    p.set_defaults(func=_backfill)

    p = sub.add_parser(
        "monitors",
        help="reward-hacking monitors of a checkpoint against its parent",
        description="Print behaviour rates of CHECKPOINT and PARENT; exit 1 when an alarm fires.",
    )
    p.add_argument("--records", required=True, type=Path, help="records (.parquet or .jsonl)")
    p.add_argument("--checkpoint", required=True, help="the candidate checkpoint id")
    p.add_argument("--parent", required=True, help="the checkpoint it was trained from")
    p.add_argument("--thresholds", type=Path, help="thresholds (JSON/TOML/YAML); defaults")
    p.set_defaults(func=_monitors)

    p = sub.add_parser(
        "workload",
        help="write a seeded synthetic event workload",
        description="Realistic events (late, duplicate, orphan, privacy...) in arrival order.",
    )
    p.add_argument("--interactions", type=positive_int, default=1000, help="how many interactions")
    p.add_argument("--seed", type=int, default=0, help="same seed, same events")
    p.add_argument("--out", required=True, type=Path, help=".jsonl or .parquet")
    p.set_defaults(func=_workload)


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
    config = _config(args.config)
    started = time.perf_counter()
    events = read_events(args.events)
    print(f"read {events.height:,} events in {time.perf_counter() - started:.1f} s",
          file=sys.stderr)  # fmt: skip
    records = replay(events, config, _stderr_progress(), workers=args.workers)
    records.write_parquet(args.out)
    elapsed = time.perf_counter() - started
    print(f"{records.height:,} records ({config.reward_version}) -> {args.out} in {elapsed:.1f} s, "
          f"{events.height / elapsed:,.0f} events/s", file=sys.stderr)  # fmt: skip
    return 0


def _backfill(args: argparse.Namespace) -> int:
    old, new = load_config(args.old_config), load_config(args.new_config)
    result = backfill_files(args.events, old, new, _stderr_progress())
    print(format_table(result))
    if args.out:
        from rewards.backfill_report import write_report  # matplotlib only for a report

        for path in write_report(result, args.out):
            print(f"wrote {path}", file=sys.stderr)
    return 0


def _monitors(args: argparse.Namespace) -> int:
    thresholds = load_thresholds(args.thresholds) if args.thresholds else MonitorThresholds()
    records = read_records(args.records)
    child = checkpoint_rates(records, args.checkpoint)
    parent = checkpoint_rates(records, args.parent)
    for rates in (child, parent):
        if rates.n_interactions == 0:
            print(f"no records of checkpoint {rates.checkpoint_id!r}", file=sys.stderr)
            return 2
    alarms = {alarm.metric: alarm for alarm in compare(child, parent, thresholds)}
    print(f"{args.checkpoint} ({child.n_interactions:,} interactions) against "
          f"{args.parent} ({parent.n_interactions:,})")  # fmt: skip
    print(f"{'metric':<24}{'parent':>10}{'child':>10}{'change':>10}  status")
    for metric in METRICS:
        value, parent_value = child.value(metric), parent.value(metric)
        if metric in alarms:
            status = "ALARM"
        elif judgeable(child, parent, metric, thresholds.min_samples):
            status = "ok"
        else:
            status = f"not judged (fewer than {thresholds.min_samples} samples)"
        change = (
            f"{relative_change(value, parent_value):+.1%}"
            if value is not None and parent_value is not None
            else "-"
        )
        print(f"{metric:<24}{_rate(parent_value):>10}{_rate(value):>10}{change:>10}  {status}")
    for alarm in alarms.values():
        print(f"alarm: {alarm.message}", file=sys.stderr)
    return 1 if alarms else 0


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def _workload(args: argparse.Namespace) -> int:
    events = generate_workload(args.interactions, seed=args.seed)
    if args.out.suffix.lower() == ".parquet":
        write_parquet(events, args.out)
    else:
        write_jsonl(events, args.out)
    print(f"{len(events):,} events -> {args.out}", file=sys.stderr)
    return 0
