"""The worker's settings: typed, checked, never read from the environment (the CLI does that)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from infra.topics import JOIN_PARTITIONS, TopicNames
from rewards.config import RewardConfig
from streams.processor import DEADLINES_IN_MEMORY


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
    # RocksDB memory per partition's database (MiB): two write buffers of a quarter each and a
    # block cache of half. Faust's defaults (3 x 64 MiB of write buffers and a 2 GiB block cache,
    # for each partition) let a worker's memory grow by gigabytes as its state grows.
    rocksdb_partition_mib: int = Field(64, ge=8)
    # Open interactions' deadlines kept in memory per partition (~180 bytes each); a partition
    # with more open rescans its store when its clock passes the last deadline it kept.
    deadlines_in_memory: int = Field(DEADLINES_IN_MEMORY, ge=2)
    # Must equal the partition count of telemetry.events (the table is co-partitioned with it).
    partitions: int = Field(JOIN_PARTITIONS, gt=0)
    changelog_replication: int = Field(1, gt=0)
    # The most events one fetched batch hands to the join (Faust's max_poll_records). A batch
    # never waits to fill: what one fetch returns is processed at once.
    chunk_size: int = Field(10_000, gt=0)
    # How often idle partitions are checked (seconds): the last windows of a quiet partition
    # close within this of their deadline. And how often progress is logged.
    tick_s: float = Field(0.25, gt=0)
    progress_s: float = Field(10.0, gt=0)
    # Prometheus metrics on this port (/metrics), or none.
    metrics_port: int | None = Field(None, ge=0, le=65535)
    # A killed worker's partitions move to the others after this many seconds without heartbeat.
    session_timeout_s: float = Field(10.0, ge=6.0)

    def rocksdb_options(self) -> dict[str, int]:
        """Faust's RocksDB options for one partition's database, within the budget above.

        >>> WorkerSettings(bootstrap="b", rocksdb_partition_mib=64).rocksdb_options()
        {'write_buffer_size': 16777216, 'max_write_buffer_number': 2, 'block_cache_size': 33554432}
        """
        budget = self.rocksdb_partition_mib * 1024 * 1024
        return {
            "write_buffer_size": budget // 4,
            "max_write_buffer_number": 2,
            "block_cache_size": budget // 2,
        }

    @property
    def topics(self) -> TopicNames:
        return TopicNames(self.topic_prefix)

    @property
    def app_id(self) -> str:
        """Faust's id: the consumer group and the changelog topic's prefix."""
        return self.group_id
