"""The Python SDK as the delivery tests drive it, in the test process and in a child process
that a test kills: a config with short flushes, and interactions emitted in order."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ingest.sdk import Client, SdkConfig
from tests.support.collector import ORG


def sdk_config(url: str, key: str, spool: Path, **overrides: Any) -> SdkConfig:
    settings: dict[str, Any] = {
        "endpoint": url,
        "api_key": key,
        "org_id": ORG,
        "spool_path": spool,
        "flush_interval_s": 0.05,
        "batch_max_events": 50,
    }
    settings.update(overrides)
    return SdkConfig(**settings)


def emit_interactions(client: Client, prefix: str, n: int) -> None:
    for i in range(n):
        client.emit(
            "interaction.started",
            f"{prefix}-{i}",
            {"mode": "agent"},
            session_id="s-1",
            user_id="u-1",
            checkpoint_id="ck-1",
        )
