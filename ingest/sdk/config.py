"""The emitter's settings as one typed, self-validating object; it never reads the environment."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

SDK_NAME = "rtrl-python-sdk"
SDK_VERSION = "0.1.0"
MAX_BATCH_EVENTS = 10_000
"""Above any collector's per-request limit, and within SQLite's bound on query parameters."""


@dataclass(frozen=True)
class SdkConfig:
    """How an editor plugin talks to the collector.

    >>> SdkConfig(endpoint="http://127.0.0.1:8080", api_key="k", org_id="acme").batch_max_events
    100
    >>> SdkConfig(endpoint="http://h", api_key="k", org_id="o", sample_rate=2.0)
    Traceback (most recent call last):
    ...
    ValueError: sample_rate must be in [0, 1], got 2.0
    """

    endpoint: str
    """Base URL of the collector; events go to ``{endpoint}/v1/events``."""
    api_key: str
    """The tenant's key, sent as ``Authorization: Bearer``."""
    org_id: str
    """The key's tenant, the default ``org_id`` of every event."""
    spool_path: Path | None = None
    """SQLite file that keeps unacknowledged events across crashes; None keeps them in memory."""
    spool_max_bytes: int = 64 * 1024 * 1024
    """Bound of the spool; beyond it the oldest events are dropped (and counted)."""
    spool_max_events: int = 1_000_000
    queue_max_events: int = 10_000
    """Bound of the hand-off queue between ``emit`` and the sender; full means dropped."""
    batch_max_events: int = 100
    batch_max_bytes: int = 512 * 1024
    """Uncompressed size of one request body at most (the collector's limit is larger)."""
    flush_interval_s: float = 1.0
    """A partial batch waits at most this long before it is sent."""
    request_timeout_s: float = 10.0
    close_on_exit_s: float = 2.0
    """At interpreter exit, flush and close within this deadline (0: do nothing). With a spool
    file what is not sent by then is kept for the next process."""
    compress: bool = True
    """gzip request bodies."""
    sample_rate: float = 1.0
    """Share of interactions kept; decided per ``interaction_id`` so an interaction stays whole."""
    privacy_mode: bool = False
    """The user opted out of training: every event carries ``privacy_mode: true``."""
    client_name: str = SDK_NAME
    client_version: str = SDK_VERSION

    def __post_init__(self) -> None:
        if not self.endpoint.startswith(("http://", "https://")):
            raise ValueError(f"endpoint must be an http(s) URL, got {self.endpoint!r}")
        if not self.api_key:
            raise ValueError("api_key is required")
        if not self.org_id:
            raise ValueError("org_id is required")
        if not 0.0 <= self.sample_rate <= 1.0:
            raise ValueError(f"sample_rate must be in [0, 1], got {self.sample_rate}")
        for name in (
            "spool_max_bytes",
            "spool_max_events",
            "queue_max_events",
            "batch_max_events",
            "batch_max_bytes",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1")
        if self.batch_max_events > MAX_BATCH_EVENTS:
            raise ValueError(f"batch_max_events must be <= {MAX_BATCH_EVENTS}")
        if self.flush_interval_s <= 0 or self.request_timeout_s <= 0:
            raise ValueError("flush_interval_s and request_timeout_s must be > 0")

    @property
    def events_url(self) -> str:
        return self.endpoint.rstrip("/") + "/v1/events"
