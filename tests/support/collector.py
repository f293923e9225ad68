"""A collector on the session broker (in this process, in a child process, or scripted), valid
events and readers of what it wrote: for the ingest tests and the ones of the stages that send
events (infra, rtrl). The ``collector`` fixture is in ``tests/conftest.py``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx
import orjson

from infra.api_keys import KeyStore
from infra.settings import client
from infra.topics import TopicNames
from ingest.collector.config import CollectorConfig
from ingest.collector.server import RunningCollector, start_in_thread
from ingest.contract import now_ts, uuid7
from tests.support.kafka import drain, free_port_block

REPO = Path(__file__).resolve().parents[2]
ORG = "acme"
OTHER_ORG = "globex"


def valid_event(**overrides: Any) -> dict[str, Any]:
    """A valid client-side event of ORG; override any field."""
    event: dict[str, Any] = {
        "event_id": uuid7(),
        "type": "edit.accepted",
        "schema_version": 1,
        "ts": now_ts(),
        "interaction_id": f"i-{uuid7()}",
        "session_id": "s-1",
        "user_id": "u-9f8e",
        "org_id": ORG,
        "checkpoint_id": "ck-7",
        "payload": {"edit_id": "e-1"},
    }
    event.update(overrides)
    return event


@dataclass
class CollectorHandle:
    """A collector in this process on the session broker, with a key for ORG and OTHER_ORG."""

    running: RunningCollector
    config: CollectorConfig
    names: TopicNames
    key: str
    other_key: str

    @property
    def url(self) -> str:
        return self.running.url

    def post(self, events: list[Any], key: str | None = None, **kwargs: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {key or self.key}"}
        return httpx.post(
            f"{self.url}/v1/events", json={"events": events}, headers=headers, timeout=30, **kwargs
        )

    def restart(self) -> None:
        """Start again on the same port (after ``running.stop()``)."""
        self.running = start_in_thread(replace(self.config, port=self.running.port))


def make_collector(bootstrap: str, names: TopicNames, tmp: Path, **limits: Any) -> CollectorHandle:
    key_db = tmp / "keys.sqlite"
    store = KeyStore(key_db)
    key, other_key = store.create(ORG), store.create(OTHER_ORG)
    store.close()
    config = CollectorConfig(
        port=0,
        bootstrap=bootstrap,
        topic_prefix=names.prefix,
        key_db=key_db,
        **{"metrics_port": 0, **limits},
    )
    return CollectorHandle(start_in_thread(config), config, names, key, other_key)


def drain_events(
    bootstrap: str, topic: str, expected: int | None = None, timeout: float = 30.0
) -> list[dict[str, Any]]:
    return [orjson.loads(m.value()) for m in drain(bootstrap, topic, expected, timeout, idle=2.0)]


class CollectorProcess:
    """`rtrl collector` in a child process, for tests that kill it."""

    def __init__(self, bootstrap: str, names: TopicNames, key_db: Path, workers: int = 1) -> None:
        self.port = free_port_block(1)
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "rtrl.cli",
                "collector",
                "--port",
                str(self.port),
                "--bootstrap",
                bootstrap,
                "--topic-prefix",
                names.prefix,
                "--key-db",
                str(key_db),
                "--workers",
                str(workers),
            ],
            cwd=REPO,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:  # no use waiting: say so now, with its exit code
                raise RuntimeError(f"collector process exited with {self.proc.returncode}")
            try:
                if httpx.get(f"{self.url}/readyz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.kill()
        raise RuntimeError("collector process did not come up in 30 s")

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)


class ScriptedCollector:
    """A plain HTTP server standing in for the collector in SDK tests that need no Kafka: it
    answers from a script of statuses (then 200) and records every batch it received."""

    def __init__(self, script: list[tuple[int, dict[str, str]]] | None = None) -> None:
        import gzip
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.script = list(script or [])
        self.batches: list[list[dict[str, Any]]] = []
        self.times: list[float] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                events = orjson.loads(body)["events"]
                outer.batches.append(events)
                outer.times.append(time.monotonic())
                status, headers = outer.script.pop(0) if outer.script else (200, {})
                answer = (
                    {
                        "results": [
                            {
                                "index": i,
                                "event_id": e.get("event_id"),
                                "accepted": True,
                                "status": 202,
                            }
                            for i, e in enumerate(events)
                        ]
                    }
                    if status == 200
                    else {"reason": "scripted", "detail": f"status {status}"}
                )
                raw = orjson.dumps(answer)
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *_: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def received_ids(self) -> list[str]:
        return [e["event_id"] for batch in self.batches for e in batch]

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def drain_until(bootstrap: str, topic: str, done: Any, timeout: float = 30.0) -> list[Any]:
    """Read ``topic`` from the start until ``done(events_so_far)`` or the timeout."""
    from confluent_kafka import Consumer

    consumer = Consumer(
        client(
            bootstrap,
            **{
                "group.id": f"t-{uuid7()}",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            },
        )
    )
    consumer.subscribe([topic])
    events: list[Any] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and not done(events):
            for m in consumer.consume(1000, timeout=0.5):
                if m.error() is None:
                    value = m.value()
                    assert value is not None, "the topic holds no tombstones"
                    events.append(orjson.loads(value))
    finally:
        consumer.close()
    return events
