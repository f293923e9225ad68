"""What the OTLP export's tests share: a real OTLP/HTTP logs receiver in this process, Arize
Phoenix as a subprocess from its own virtualenv (``scripts/bootstrap``), and reward records to
publish. The fixtures over them are in ``tests/otel/conftest.py``."""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)

from infra.kafka_dist import default_cache_root
from infra.ports import free_port_block
from rewards.record import RewardRecord

REPO = Path(__file__).resolve().parents[2]


def reward(interaction_id: str, **overrides: Any) -> RewardRecord:
    """A scored record of spec v1: two edits, one accepted and kept, one rejected."""
    t_open = datetime(2026, 12, 1, 9, 0, 0, 250_000, tzinfo=UTC)
    values: dict[str, Any] = dict(
        interaction_id=interaction_id, revision=0, reward_version="v1-0123abcd",
        status="scored", censor_reason=None, reward=0.65,
        r_edit=0.75, r_followup=0.0, r_tool=0.0, r_clarify=0.0, r_latency=-0.1,
        org_id="acme", user_id="u-1", session_id="s-1", checkpoint_id="ckpt-7",
        experiment_name=None, experiment_arm=None,
        t_open=t_open, t_close=t_open + timedelta(seconds=1800),
        n_events=6, n_duplicates=0, n_late=0, n_orphans=0, n_edits=2, n_accepted=1,
        n_rejected=1, n_reverted=0, n_tool_calls=0, n_invalid_tool_calls=0, n_clarifying=0,
        n_subagents=0, n_subagents_unused=0, dissatisfied=False, event_ids=("e1", "e2"),
    )  # fmt: skip
    values.update(overrides)
    return RewardRecord(**values)


@dataclass
class LogsReceiver:
    """A real OTLP/HTTP logs endpoint: decodes each POST /v1/logs body as protobuf.

    ``fail_next`` answers that many requests 503 first; ``hold`` makes every request wait
    (never answered while set); ``accepted`` lists the requests answered 200, ``seen`` every
    request that arrived whole."""

    url: str = ""
    accepted: list[ExportLogsServiceRequest] = field(default_factory=list)
    seen: list[ExportLogsServiceRequest] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    fail_next: int = 0
    hold: threading.Event = field(default_factory=threading.Event)  # set: hold requests
    lock: threading.Lock = field(default_factory=threading.Lock)

    def records(self) -> list[Any]:
        with self.lock:
            return [lr for req in self.accepted for rl in req.resource_logs
                    for sl in rl.scope_logs for lr in sl.log_records]  # fmt: skip


def _handler(receiver: LogsReceiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            if self.path != "/v1/logs" or self.headers.get("content-type") != (
                "application/x-protobuf"
            ):
                self._answer(404, b"")
                return
            request = ExportLogsServiceRequest.FromString(body)
            with receiver.lock:
                receiver.seen.append(request)
                receiver.headers.append({k.lower(): v for k, v in self.headers.items()})
                failing = receiver.fail_next > 0
                receiver.fail_next -= 1 if failing else 0
            while receiver.hold.is_set():
                time.sleep(0.05)
            if failing:
                self._answer(503, b"busy", {"Retry-After": "0"})
                return
            with receiver.lock:
                receiver.accepted.append(request)
            self._answer(200, ExportLogsServiceResponse().SerializeToString())

        def _answer(self, status: int, body: bytes, extra: dict[str, str] | None = None) -> None:
            self.send_response(status)
            self.send_header("content-type", "application/x-protobuf")
            self.send_header("content-length", str(len(body)))
            for k, v in (extra or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    return Handler


@contextmanager
def running_logs_receiver() -> Iterator[LogsReceiver]:
    """A :class:`LogsReceiver` served on a free port until the block ends."""
    receiver = LogsReceiver()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(receiver))
    server.daemon_threads = True
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        receiver.hold.clear()
        server.shutdown()
        server.server_close()


def phoenix_version() -> str:
    """The Phoenix version ``scripts/bootstrap`` pins (one place)."""
    text = (REPO / "scripts" / "bootstrap").read_text()
    match = re.search(r"^PHOENIX_VERSION=([0-9.]+)$", text, re.MULTILINE)
    assert match, "scripts/bootstrap pins no PHOENIX_VERSION"
    return match.group(1)


@dataclass(frozen=True)
class Phoenix:
    url: str
    otlp_traces: str


@contextmanager
def running_phoenix(work: Path) -> Iterator[Phoenix]:
    """Arize Phoenix on free ports, its database in ``work``, nothing fetched from outside
    (its telemetry and external resources off)."""
    version = phoenix_version()
    executable = default_cache_root(os.environ) / "phoenix" / version / "bin" / "phoenix"
    assert executable.exists(), f"no Phoenix {version} at {executable}: run scripts/bootstrap"
    base = free_port_block(2)
    http_port, grpc_port = base, base + 1
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PHOENIX_", "OTEL_"))}
    env.update(
        PHOENIX_WORKING_DIR=str(work), PHOENIX_HOST="127.0.0.1", PHOENIX_PORT=str(http_port),
        PHOENIX_GRPC_PORT=str(grpc_port), PHOENIX_TELEMETRY_ENABLED="false",
        PHOENIX_ALLOW_EXTERNAL_RESOURCES="false",
    )  # fmt: skip
    log = (work / "phoenix.log").open("wb")
    proc = subprocess.Popen([str(executable), "serve"], env=env, stdout=log,
                            stderr=subprocess.STDOUT)  # fmt: skip
    url = f"http://127.0.0.1:{http_port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            assert proc.poll() is None, (work / "phoenix.log").read_text()[-3000:]
            try:
                if httpx.get(url + "/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "Phoenix did not start in 90 s"
            time.sleep(0.25)
        yield Phoenix(url, url + "/v1/traces")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
