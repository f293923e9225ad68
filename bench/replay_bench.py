"""Replay throughput on a generated workload, against a limit measured in the same run.

    .venv/bin/python bench/replay_bench.py [--events 1000000] [--format parquet|jsonl]
                                           [--workers 1 2]

The workload is cached under bench/out/. The limit is what polars alone does with the same file:
read it and group it by interaction (count and first arrival per interaction); the replay cannot
beat it, since it does that and then runs the reward function per interaction in Python.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import polars as pl

from rewards.config import RewardConfig
from rewards.eventio import read_events, write_jsonl, write_parquet
from rewards.replay import replay
from rewards.workload import generate_workload

OUT = Path(__file__).parent / "out"
EVENTS_PER_INTERACTION = 9.74  # measured mean of the default workload


def workload_file(n_events: int, fmt: str) -> Path:
    path = OUT / f"workload-{n_events}.{fmt}"
    if not path.exists():
        OUT.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        events = generate_workload(round(n_events / EVENTS_PER_INTERACTION), seed=0)
        print(f"generated {len(events):,} events in {time.perf_counter() - started:.1f} s",
              file=sys.stderr)  # fmt: skip
        (write_parquet if fmt == "parquet" else write_jsonl)(events, path)
    return path


def limit_events_per_second(path: Path) -> tuple[int, float]:
    """polars alone: read the file, group by interaction."""
    started = time.perf_counter()
    events = read_events(path)
    groups = events.group_by("interaction_id").agg(pl.len(), pl.col("received_at").min())
    elapsed = time.perf_counter() - started
    assert groups.height > 0
    return events.height, events.height / elapsed


def replay_events_per_second(path: Path, workers: int) -> tuple[int, float, float]:
    """The replay as `rtrl replay` runs it: read, group, compute, build the records frame.

    Returns (records, events per wall second, events per CPU second of this process)."""
    started, cpu_started = time.perf_counter(), time.process_time()
    events = read_events(path)
    records = replay(events, RewardConfig(), workers=workers)
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    return records.height, events.height / elapsed, events.height / cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000, help="about this many events")
    parser.add_argument("--format", choices=("parquet", "jsonl"), default="parquet")
    parser.add_argument("--workers", type=int, nargs="+", default=[1], help="e.g. 1 2")
    args = parser.parse_args()
    path = workload_file(args.events, args.format)
    print(f"load average before: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    n_events, limit = limit_events_per_second(path)
    print(f"file: {path.name} ({n_events:,} events)")
    print(f"limit (polars read + group_by): {limit:,.0f} events/s")
    for workers in args.workers:
        n_records, rate, per_cpu = replay_events_per_second(path, workers)
        cpu_note = f", {per_cpu:,.0f} events per CPU second" if workers == 1 else ""
        print(f"replay, {workers} worker(s), {n_records:,} interactions: {rate:,.0f} events/s "
              f"(ratio to limit {rate / limit:.3f}){cpu_note}")  # fmt: skip
    print(f"load average after: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
