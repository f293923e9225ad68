"""The collector's settings and its key commands': typed, validated, built from CLI arguments
(``ingest.collector.cli``) only."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from infra.api_keys import DEFAULT_KEY_DB


@dataclass(frozen=True)
class CollectorConfig:
    """
    >>> CollectorConfig(port=8080).max_events_per_batch
    1000
    >>> CollectorConfig(port=70000)
    Traceback (most recent call last):
    ...
    ValueError: port must be in 0..65535, got 70000
    """

    port: int
    """0 lets the OS choose (tests)."""
    host: str = "127.0.0.1"
    bootstrap: str = "127.0.0.1:9092"
    topic_prefix: str = ""
    key_db: Path = DEFAULT_KEY_DB
    max_body_bytes: int = 5 * 1024 * 1024
    """Largest request body, compressed or not, and largest body after gunzip (413 beyond)."""
    max_events_per_batch: int = 1000
    """413 beyond."""
    rate_per_key: float = 50.0
    """Requests per second per API key (token bucket refill); 429 beyond."""
    burst_per_key: int = 100
    """Requests a key may make at once after being idle (token bucket size)."""
    delivery_timeout_s: float = 10.0
    """How long Kafka may take to acknowledge a batch before the answer is 503."""
    producer_queue_max: int = 100_000
    """Messages waiting in the producer at most; a full queue answers 503."""
    retry_after_s: int = 1
    """``Retry-After`` sent with 503 (429 computes its own from the bucket)."""
    workers: int = 1
    """Processes serving the port, each with its own producer and per-key rate limit."""
    metrics_port: int | None = None
    """Prometheus metrics on this port, apart from the public one (worker ``i`` of several:
    ``metrics_port + i``); None: not served. 0 lets the OS choose (tests)."""

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ValueError(f"port must be in 0..65535, got {self.port}")
        for name in (
            "max_body_bytes",
            "max_events_per_batch",
            "burst_per_key",
            "producer_queue_max",
            "retry_after_s",
            "workers",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.rate_per_key <= 0 or self.delivery_timeout_s <= 0:
            raise ValueError("rate_per_key and delivery_timeout_s must be > 0")
        if self.metrics_port is not None and not (
            0 <= self.metrics_port <= 65535 - self.workers + 1
        ):
            raise ValueError(
                f"metrics_port must leave room for {self.workers} worker(s) "
                f"in 0..65535, got {self.metrics_port}"
            )
        if not self.bootstrap:
            raise ValueError("bootstrap is required")


@dataclass(frozen=True)
class KeysOptions:
    """What `rtrl keys create|list|revoke` act on: the key store, and (create, list) a tenant."""

    org: str | None = field(default=None, metadata={"help": "only this tenant's keys"})
    key_db: Path = field(
        default=DEFAULT_KEY_DB, metadata={"help": "SQLite file of hashed API keys"}
    )
