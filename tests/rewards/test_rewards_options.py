"""`rtrl replay`, `rtrl backfill`, `rtrl monitors`, `rtrl workload`: every field of their settings
classes is an option of the command."""

from __future__ import annotations

from pathlib import Path

from rewards.cli_options import (
    BACKFILL_OPTIONS,
    MONITORS_OPTIONS,
    REPLAY_OPTIONS,
    WORKLOAD_OPTIONS,
    ReplayOptions,
)
from tests.support.settings_options import assert_every_field_is_an_option, parse, subcommand


def test_every_field_is_an_option_of_its_command() -> None:
    for name, options in (
        ("replay", REPLAY_OPTIONS),
        ("backfill", BACKFILL_OPTIONS),
        ("monitors", MONITORS_OPTIONS),
        ("workload", WORKLOAD_OPTIONS),
    ):
        assert_every_field_is_an_option(subcommand(name), options)


def test_replay_reads_its_files_and_defaults() -> None:
    args = parse("replay", "--events", "a.jsonl", "b.parquet", "--out", "r.parquet")
    assert REPLAY_OPTIONS.read(args) == ReplayOptions(
        events=[Path("a.jsonl"), Path("b.parquet")], out=Path("r.parquet")
    )
