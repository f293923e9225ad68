"""Helpers for the stream tests: the replay's answer, latest revisions, a dict store, a worker,
a reader of a topic and a group of worker subprocesses."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import zlib
from collections import defaultdict
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from confluent_kafka import Consumer, TopicPartition

from infra.settings import client
from infra.topics import TopicNames
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
        cmd += ["--reward-config", str(config_path)]
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


class TopicReader:
    """Every message of a topic from the beginning, kept as it arrives."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.consumer = Consumer(
            client(bootstrap, **{"group.id": f"r{time.time_ns()}", "enable.auto.commit": False})
        )
        parts = self.consumer.list_topics(topic, timeout=30).topics[topic].partitions
        self.consumer.assign([TopicPartition(topic, p, 0) for p in parts])
        self.messages: list = []

    def poll(self, seconds: float = 1.0) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for m in self.consumer.consume(5000, timeout=0.2):
                if m.error() is None:
                    self.messages.append(m)

    def values(self) -> list[dict]:
        return [orjson.loads(m.value()) for m in self.messages]

    def close(self) -> None:
        self.consumer.close()


class Workers:
    """Worker subprocesses of one group; every one is killed at the end whatever happens."""

    def __init__(self, bootstrap: str, names: TopicNames, tmp: Path) -> None:
        self.bootstrap, self.names, self.tmp = bootstrap, names, tmp
        self.procs: list = []

    def start(self, name: str, *extra: str):
        proc = start_worker(
            self.bootstrap,
            self.names.prefix,
            self.tmp / name,
            None,
            *extra,
            log=self.tmp / f"{name}.log",
        )
        self.procs.append(proc)
        return proc

    def kill(self, proc) -> None:
        """SIGKILL the supervisor and its worker (the whole process group)."""
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)

    @staticmethod
    def worker_pid(proc, other_than: int | None = None) -> int:
        """The pid of the worker process under the supervisor ``proc``."""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
            if children and int(children[0]) != other_than:
                return int(children[0])
            time.sleep(0.1)
        pytest.fail("the supervisor runs no (new) worker process")

    def kill_worker_only(self, proc) -> None:
        """SIGKILL the worker under the supervisor ``proc``; wait until it starts another."""
        pid = self.worker_pid(proc)
        os.kill(pid, signal.SIGKILL)
        self.worker_pid(proc, other_than=pid)

    def logs(self) -> str:
        return "\n".join(p.read_text(errors="replace")[-3000:] for p in self.tmp.glob("*.log"))

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(30)
            except Exception:  # noqa: BLE001 - then it is killed
                os.killpg(proc.pid, signal.SIGKILL)
