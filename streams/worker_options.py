"""`rtrl stream worker`'s command line as one settings class: its parser's options, the argv the
supervisor starts the worker again with, and the worker's settings all come from it.

Why apart from ``WorkerSettings``: the command line names some things otherwise (a reward
configuration file, not the configuration; a group id that defaults from the topic prefix) and
leaves others to the broker (partitions, changelog replication), so its fields are what users
type and ``settings`` turns them into what the worker runs with (and validates them there).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from infra.kafka_options import BOOTSTRAP_OPTION, TOPIC_PREFIX_HELP
from infra.settings import DEFAULT_BOOTSTRAP
from infra.settings_cli import SettingsOptions
from rewards.cli_options import REWARD_CONFIG_OPTION
from streams.processor import DEADLINES_IN_MEMORY
from streams.settings import WorkerSettings


@dataclass(frozen=True)
class WorkerOptions:
    """The options of `rtrl stream worker` (and ``python -m streams``), as typed."""

    bootstrap: str = DEFAULT_BOOTSTRAP  # its option falls back on the environment's

    topic_prefix: str = field(default="", metadata={"help": TOPIC_PREFIX_HELP})
    data_dir: Path = field(
        default=Path(".rtrl/stream"),
        metadata={"help": "local state (RocksDB tables) of this worker"},
    )
    config: Path | None = field(
        default=None,
        metadata={"help": "reward configuration (.toml/.json/.yaml); default: spec v1's numbers"},
    )
    group_id: str | None = field(
        default=None,
        metadata={"help": "consumer group and changelog prefix (default rtrl-stream-<prefix>)"},
    )
    store: Literal["rocksdb", "memory"] = field(
        default="rocksdb",
        metadata={"help": "where the table lives: rocksdb (bounded memory, default) or memory"},
    )
    rocksdb_mib: int = field(
        default=64,
        metadata={
            "help": "RocksDB memory per partition's state database, MiB: write buffers and "
            "block cache"
        },
    )
    deadlines_in_memory: int = field(
        default=DEADLINES_IN_MEMORY,
        metadata={
            "help": "open interactions' deadlines kept in memory per partition (~180 bytes "
            "each); beyond, the partition's store is rescanned when needed"
        },
    )
    chunk_size: int = field(
        default=10_000,
        metadata={"help": "most events per fetched batch, made durable together"},
    )
    metrics_port: int | None = field(
        default=None,
        metadata={"help": "serve Prometheus metrics on this port (/metrics); default: none"},
    )
    progress_s: float = field(
        default=10.0, metadata={"help": "seconds between progress lines (default 10)"}
    )

    @property
    def group(self) -> str:
        """The consumer group: the one given, else one per topic prefix."""
        return self.group_id or f"rtrl-stream-{self.topic_prefix}".rstrip("-.")

    def settings(self, partitions: int, replication: int) -> WorkerSettings:
        """The worker's settings, checked; ``partitions`` and ``replication`` are the broker's
        (its events topic's partition count, the changelog's replication)."""
        from rewards.config import RewardConfig, load_config

        return WorkerSettings(
            bootstrap=self.bootstrap,
            topic_prefix=self.topic_prefix,
            data_dir=self.data_dir,
            reward=load_config(self.config) if self.config else RewardConfig(),
            group_id=self.group,
            store=self.store,
            rocksdb_partition_mib=self.rocksdb_mib,
            deadlines_in_memory=self.deadlines_in_memory,
            partitions=partitions,
            changelog_replication=replication,
            chunk_size=self.chunk_size,
            metrics_port=self.metrics_port,
            progress_s=self.progress_s,
        )


# Every field is an option; text options keep argparse's own (no) type, as they were written.
WORKER_OPTIONS = SettingsOptions(
    WorkerOptions,
    typed_text=False,
    options={"bootstrap": BOOTSTRAP_OPTION, "config": REWARD_CONFIG_OPTION},
)
