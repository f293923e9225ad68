"""Batch replay: events in, one record per interaction out, by the stream's very function.

polars sorts the events by interaction and hands them over in chunks of whole interactions, so
only one chunk at a time becomes Python objects; :func:`compute_record` does the rest. A replay
closes every window at the end of its input: every interaction gets its final record, revision 0.
"""

from __future__ import annotations

import gc
import multiprocessing
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from contextlib import contextmanager
from typing import Any

import polars as pl

from rewards.config import RewardConfig
from rewards.eventio import REWARD_COLUMNS, frame_to_events
from rewards.function import compute_record
from rewards.record import RECORD_SCHEMA, RewardRecord, records_to_frame
from rewards.tenant_keys import interaction_columns

# Rows converted to Python at a time; whole interactions only, so a chunk may be a little larger.
CHUNK_ROWS = 100_000

# Without these an event cannot be placed in a window (received_at is set by the collector).
REQUIRED_COLUMNS = ("event_id", "type", "ts", "received_at", "interaction_id")

Progress = Callable[[int, int], None]  # (interactions done, events done)


def iter_chunks(events: pl.DataFrame, chunk_rows: int = CHUNK_ROWS) -> Iterator[pl.DataFrame]:
    """The events sorted by interaction, in slices of about ``chunk_rows`` whole interactions."""
    columns = [c for c in REWARD_COLUMNS if c in events.columns]
    unusable = events.select(pl.any_horizontal(pl.col(REQUIRED_COLUMNS).is_null()).sum()).item()
    if unusable:
        raise ValueError(f"{unusable} events lack one of {REQUIRED_COLUMNS}: not collected events")
    keys = interaction_columns(columns)
    ordered = events.select(columns).sort(keys)
    sizes = ordered.group_by(keys, maintain_order=True).len()["len"].to_list()
    start = offset = 0
    while start < len(sizes):
        stop, rows = start, 0
        while stop < len(sizes) and rows < chunk_rows:
            rows += sizes[stop]
            stop += 1
        yield ordered.slice(offset, rows)
        start, offset = stop, offset + rows


def iter_interactions(chunk: pl.DataFrame) -> Iterator[list[dict[str, Any]]]:
    """The events of each interaction of a sorted chunk, as dicts."""
    keys = interaction_columns(chunk.columns)
    sizes = chunk.group_by(keys, maintain_order=True).len()["len"].to_list()
    rows = frame_to_events(chunk)
    position = 0
    for size in sizes:
        yield rows[position : position + size]
        position += size


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cycle collector: the millions of short-lived, acyclic event dicts a replay makes
    trigger it over and over (measured: it nearly doubles the time), and free nothing."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def replay_chunk(chunk: pl.DataFrame, configs: Sequence[RewardConfig]) -> list[pl.DataFrame]:
    """The records of a chunk's interactions under each config (runs in a worker or inline)."""
    records: list[list[RewardRecord]] = [[] for _ in configs]
    with _gc_paused():
        for interaction in iter_interactions(chunk):
            for config, out in zip(configs, records, strict=True):
                out.append(compute_record(interaction, config))
    return [records_to_frame(out) for out in records]


def replay_many(
    events: pl.DataFrame,
    configs: Sequence[RewardConfig],
    progress: Progress | None = None,
    workers: int = 1,
) -> list[pl.DataFrame]:
    """Records of every interaction under each config (one pass over the events for all).

    ``workers`` > 1 spreads chunks over that many processes (spawned, not forked: forking a
    process that runs polars' thread pool can deadlock); the output is the same.
    """
    parts: list[list[pl.DataFrame]] = [[] for _ in configs]
    n_interactions = n_events = 0
    for chunk, frames in _map_chunks(iter_chunks(events), configs, workers):
        for part, frame in zip(parts, frames, strict=True):
            part.append(frame)
        n_interactions += frames[0].height
        n_events += chunk.height
        if progress is not None:
            progress(n_interactions, n_events)
    return [pl.concat(part) if part else pl.DataFrame(schema=RECORD_SCHEMA) for part in parts]


def _map_chunks(
    chunks: Iterator[pl.DataFrame], configs: Sequence[RewardConfig], workers: int
) -> Iterator[tuple[pl.DataFrame, list[pl.DataFrame]]]:
    """(chunk, its records per config), in chunk order; at most 2 chunks per worker in flight."""
    if workers <= 1:
        for chunk in chunks:
            yield chunk, replay_chunk(chunk, configs)
        return
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(workers, mp_context=context) as pool:
        pending: deque[tuple[pl.DataFrame, Future[list[pl.DataFrame]]]] = deque()
        for chunk in chunks:
            pending.append((chunk, pool.submit(replay_chunk, chunk, configs)))
            if len(pending) >= 2 * workers:
                done, future = pending.popleft()
                yield done, future.result()
        while pending:
            done, future = pending.popleft()
            yield done, future.result()


def replay(
    events: pl.DataFrame,
    config: RewardConfig,
    progress: Progress | None = None,
    workers: int = 1,
) -> pl.DataFrame:
    """One record per interaction (schema :data:`RECORD_SCHEMA`), windows closed at end of input."""
    return replay_many(events, [config], progress, workers)[0]
