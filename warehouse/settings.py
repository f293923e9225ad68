"""The settings of the warehouse's two services, the sink (``warehouse.sink``) and the batch
builder (``warehouse.batches``), each field's help that of its option (``warehouse.cli`` derives
one option per field, ``infra.settings_cli``).

A module apart from the services, which import pyarrow and DuckDB, so that building the ``rtrl``
command line (every stage's process, the gateway's too) loads neither.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from infra.topics import TopicNames
from rewards.config import RewardConfig

if TYPE_CHECKING:
    from warehouse.quality import QualityConfig

_DEFAULTS = RewardConfig()
DEFAULT_GROUP = "rtrl-warehouse-sink"  # the sink's consumer group, whose commits compact reads


def _help(text: str) -> dict[str, str]:
    return {"help": text}


def _quality() -> QualityConfig:
    from warehouse.quality import QualityConfig  # polars and pyarrow: when a build is set up

    return QualityConfig()


@dataclass(frozen=True)
class SinkConfig:
    """How the sink batches and where it writes; never read from the environment here."""

    bootstrap: str
    root: str  # folder or fsspec URL
    topics: TopicNames = field(default_factory=TopicNames)
    group_id: str = field(default=DEFAULT_GROUP, metadata=_help("consumer group of the sink"))
    max_rows: int = field(  # flush when the buffers hold this many messages ...
        default=50_000, metadata=_help("flush after this many messages")
    )
    max_seconds: float = field(  # ... or when the oldest buffered message waited this long
        default=5.0, metadata=_help("flush when the oldest buffered message waited this long")
    )
    once: bool = field(  # drain what the topics hold now, flush, exit
        default=False, metadata=_help("drain what the topics hold now and exit")
    )
    once_idle_s: float = 10.0  # in --once mode, also stop after this long without a message
    compact_every_s: float = 300.0  # merge small committed files this often (0: never)
    # A killed sink's partitions move to its successor only once the group gives up on it.
    session_timeout_ms: int = 10_000
    # Static membership: a sink restarted with the same id takes its partitions back at once.
    instance_id: str | None = field(
        default=None,
        metadata=_help("static group membership: a restart with the same id resumes at once"),
    )
    metrics_port: int | None = field(  # serve Prometheus metrics while running
        default=None,
        metadata=_help("serve Prometheus metrics on this port (/metrics); default: none"),
    )

    def __post_init__(self) -> None:
        if self.max_rows <= 0 or self.max_seconds <= 0:
            raise ValueError("max_rows and max_seconds must be positive")
        if self.metrics_port is not None and not 0 <= self.metrics_port <= 65535:
            raise ValueError(f"metrics_port must be in 0..65535, got {self.metrics_port}")

    def datasets(self) -> dict[str, str]:
        """topic name -> warehouse dataset."""
        t = self.topics
        return {t.rewards: "rewards", t.events: "events", t.rollouts: "rollouts",
                t.late: "late", t.dlq: "dlq", t.checkpoints: "checkpoints"}  # fmt: skip


@dataclass(frozen=True)
class BuildConfig:
    min_rows: int = field(  # a slice with fewer candidate rows waits for more
        default=1, metadata=_help("smallest batch worth building")
    )
    settle_s: int = field(  # no revision can follow after this
        default=_DEFAULTS.late_s + _DEFAULTS.grace_s,
        metadata=_help("only interactions closed this long ago (the late window and its grace)"),
    )
    quality: QualityConfig = field(default_factory=_quality)

    def __post_init__(self) -> None:
        if self.min_rows < 1 or self.settle_s < 0:
            raise ValueError("min_rows must be >= 1 and settle_s >= 0")
