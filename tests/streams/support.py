"""Helpers for the stream tests: the replay's answer, latest revisions, a dict store, a worker."""

from __future__ import annotations

import os
import subprocess
import sys
import zlib
from collections import defaultdict
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson

from rewards.config import RewardConfig
from rewards.function import compute_record

REPO = Path(__file__).resolve().parents[2]
# Windows far in the past, so that the wall clock of an idle partition closes every one of them.
PAST_START = "2026-01-05T00:00:00Z"


class DictStore(dict):
    """The processor's StateStore over a plain dict (what the table is in the worker)."""

    def put(self, key: str, value: bytes) -> None:
        self[key] = value

    def delete(self, key: str) -> None:
        self.pop(key, None)


def batch_records(events: Iterable[dict[str, Any]], config: RewardConfig) -> dict[str, dict]:
    """What a replay over the same events says: one record per interaction, without revision."""
    by_interaction: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for event in events:
        by_interaction[event["interaction_id"]].append(event)
    out = {}
    for interaction_id, group in by_interaction.items():
        body = compute_record(group, config).to_json_dict()
        del body["revision"]
        out[interaction_id] = body
    return out


def latest_revisions(records: Iterable[dict[str, Any]]) -> tuple[dict[str, dict], list[str]]:
    """Latest revision per interaction (without ``revision``), and the problems seen: gaps in
    0..n, or one revision number carrying two different records."""
    seen: dict[str, dict[int, dict]] = defaultdict(dict)
    problems = []
    for record in records:
        body = dict(record)
        revision = body.pop("revision")
        known = seen[body["interaction_id"]].get(revision)
        if known is not None and known != body:
            problems.append(f"{body['interaction_id']}: revision {revision} names two records")
        seen[body["interaction_id"]][revision] = body
    latest = {}
    for interaction_id, by_revision in seen.items():
        if sorted(by_revision) != list(range(len(by_revision))):
            problems.append(f"{interaction_id}: revisions {sorted(by_revision)} are not 0..n")
        latest[interaction_id] = by_revision[max(by_revision)]
    return latest, problems


def partition_of(interaction_id: str, partitions: int = 6) -> int:
    """A stable spread of keys over partitions for broker-free tests."""
    return zlib.crc32(interaction_id.encode()) % partitions


def chunks(items: list, size: int) -> Iterator[list]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def start_worker(
    bootstrap: str,
    prefix: str,
    data_dir: Path,
    config_path: Path | None = None,
    *extra: str,
    log: Path | None = None,
) -> subprocess.Popen:
    """``python -m streams`` as a subprocess (its own process group, so SIGKILL is clean)."""
    cmd = [
        sys.executable,
        "-m",
        "streams",
        "--bootstrap",
        bootstrap,
        "--topic-prefix",
        prefix,
        "--data-dir",
        str(data_dir),
        *extra,
    ]
    if config_path is not None:
        cmd += ["--config", str(config_path)]
    out = open(log, "ab") if log else subprocess.DEVNULL  # noqa: SIM115 - closed by the child
    return subprocess.Popen(
        cmd,
        cwd=REPO,
        stdout=out,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        start_new_session=True,
    )


def decode_records(messages: Iterable[Any]) -> list[dict[str, Any]]:
    return [orjson.loads(m.value()) for m in messages]
