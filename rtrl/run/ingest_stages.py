"""The ingest side every `rtrl run` starts first: an API key per organisation, the collector
behind them, and the stream worker that joins the events into rewards."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rtrl.run.procs import Stage, http_ready, run_stage, wait_until


def create_keys(keys_db: Path, orgs: Sequence[str], log_file: Path) -> dict[str, str]:
    """A new API key for each of ``orgs`` in ``keys_db`` (`rtrl keys create`): org -> key."""
    keys = {}
    for org in orgs:
        out = run_stage("keys", ["keys", "create", "--org", org, "--key-db", str(keys_db)],
                        log_file)  # fmt: skip
        keys[org] = out.strip().split()[-1]
    return keys


def start_ingest(root: Path, kafka: list[str], collector_port: int, run_id: str,
                 reward_config: Path, stages: list[Stage]) -> None:  # fmt: skip
    """The collector on ``collector_port`` (the keys of ``root/keys.db``) and the stream worker
    scoring with ``reward_config``, appended to ``stages`` (stopped by the caller)."""
    logs = root / "logs"
    collector = Stage(
        "collector",
        ["collector", "--port", str(collector_port), "--key-db", str(root / "keys.db"), *kafka],
        logs / "collector.log",
    )
    stages.append(collector.start())
    wait_until("collector", lambda: http_ready(collector_port), 60, collector)
    worker = Stage(
        "stream worker",
        ["stream", "worker", *kafka, "--data-dir", str(root / "stream"), "--reward-config",
         str(reward_config), "--group-id", f"{run_id}-stream"],
        logs / "stream.log",
    )  # fmt: skip
    stages.append(worker.start())
