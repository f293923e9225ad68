"""`rtrl replay`, `rtrl backfill`, `rtrl monitors` and `rtrl workload`'s options as settings
classes (``infra.settings_cli``): one field per option, read back into them."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from infra.cli import positive_int
from infra.settings_cli import Option, SettingsOptions

_EVENT_FILES = ".jsonl or .parquet"


@dataclass(frozen=True, kw_only=True)
class ReplayOptions:
    """Which events `rtrl replay` recomputes records from, under which config, into which file."""

    events: list[Path] = field(metadata={"help": _EVENT_FILES})
    out: Path = field(metadata={"help": "output Parquet file"})
    config: Path | None = field(
        default=None,
        metadata={
            "help": "reward config (JSON/TOML/YAML, or a shipped name: default, agent); "
            "spec defaults"
        },
    )
    workers: int = field(default=1, metadata={"help": "processes computing records (1)"})


@dataclass(frozen=True, kw_only=True)
class BackfillOptions:
    """The events and the two reward configs `rtrl backfill` compares, and where its report goes."""

    events: list[Path] = field(metadata={"help": _EVENT_FILES})
    old_config: Path = field(
        metadata={"help": "the current reward config (a file, or a shipped name: default, agent)"}
    )
    new_config: Path = field(
        metadata={"help": "the candidate reward config (a file, or a shipped name: default, agent)"}
    )
    out: Path | None = field(
        default=None,
        metadata={
            "help": "directory for backfill.csv, backfill.json and backfill.svg (each "
            "checkpoint's reward distribution, old and new)"
        },
    )


@dataclass(frozen=True, kw_only=True)
class MonitorsOptions:
    """The records and the two checkpoints `rtrl monitors` compares, and its thresholds."""

    records: Path = field(metadata={"help": "records (.parquet or .jsonl)"})
    checkpoint: str = field(metadata={"help": "the candidate checkpoint id"})
    parent: str = field(metadata={"help": "the checkpoint it was trained from"})
    thresholds: Path | None = field(
        default=None, metadata={"help": "thresholds (JSON/TOML/YAML); defaults"}
    )


@dataclass(frozen=True, kw_only=True)
class WorkloadOptions:
    """The synthetic workload `rtrl workload` writes: its size, its seed and its file."""

    interactions: int = field(default=1000, metadata={"help": "how many interactions"})
    seed: int = field(default=0, metadata={"help": "same seed, same events"})
    out: Path = field(metadata={"help": _EVENT_FILES})


_REQUIRED = Option(required=True)
# the reward configuration, named as in every command (`rtrl train`, `rtrl run`); --config before
REWARD_CONFIG_OPTION = Option(flags=("--reward-config",), old_flags=("--config",))
_REQUIRED_FILES = Option(required=True, nargs="+")
# These helps never said their defaults; text options keep argparse's own (no) type.
REPLAY_OPTIONS = SettingsOptions(
    ReplayOptions,
    options={
        "events": _REQUIRED_FILES,
        "out": _REQUIRED,
        "config": REWARD_CONFIG_OPTION,
        "workers": Option(type=positive_int, show_default=False),
    },
)
BACKFILL_OPTIONS = SettingsOptions(
    BackfillOptions,
    options={"events": _REQUIRED_FILES, "old_config": _REQUIRED, "new_config": _REQUIRED},
)
MONITORS_OPTIONS = SettingsOptions(
    MonitorsOptions,
    typed_text=False,
    options={"records": _REQUIRED, "checkpoint": _REQUIRED, "parent": _REQUIRED},
)
WORKLOAD_OPTIONS = SettingsOptions(
    WorkloadOptions,
    options={
        "interactions": Option(type=positive_int, show_default=False),
        "seed": Option(show_default=False),
        "out": _REQUIRED,
    },
)
