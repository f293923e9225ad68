"""The worker's settings: typed, checked, never read from the environment (the CLI does that)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from infra.topics import JOIN_PARTITIONS, TopicNames
from rewards.config import RewardConfig


class WorkerSettings(BaseModel):
    """Everything `rtrl stream worker` needs to join events into reward records."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    bootstrap: str
    topic_prefix: str = ""
    data_dir: Path = Path(".rtrl/stream")
    reward: RewardConfig = Field(default_factory=RewardConfig)
    # Consumer group, Faust app id and changelog topic prefix; one per deployment.
    group_id: str = "rtrl-stream"
    # "rocksdb": state on disk, memory bounded by RocksDB's caches; "memory": all in RAM.
    store: Literal["rocksdb", "memory"] = "rocksdb"
    # Must equal the partition count of telemetry.events (the table is co-partitioned with it).
    partitions: int = Field(JOIN_PARTITIONS, gt=0)
    changelog_replication: int = Field(1, gt=0)
    # Events taken per chunk, and how long a chunk waits to fill (seconds).
    chunk_size: int = Field(2000, gt=0)
    chunk_within_s: float = Field(0.5, gt=0)
    # How often idle partitions are checked (seconds) and progress is logged.
    tick_s: float = Field(1.0, gt=0)
    progress_s: float = Field(10.0, gt=0)
    # A killed worker's partitions move to the others after this many seconds without heartbeat.
    session_timeout_s: float = Field(10.0, ge=6.0)

    @property
    def topics(self) -> TopicNames:
        return TopicNames(self.topic_prefix)

    @property
    def app_id(self) -> str:
        """Faust's id: the consumer group and the changelog topic's prefix."""
        return self.group_id
