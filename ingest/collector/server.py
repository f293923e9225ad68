"""Assemble and run a collector: key store + Kafka sink + app under uvicorn.

``run`` serves in the foreground (the CLI); ``run_workers`` does so in several processes that
share one listening socket (one Python process tops out at one core); ``start_in_thread`` serves
on a background thread of the calling process (tests, benchmarks). All flush the producer when
the server stops. Metrics, when asked for, are served on their own port by a thread of each
serving process, never on the public port.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any

import uvicorn

from infra.api_keys import KeyStore
from infra.http_server import http_server
from infra.lifetime import die_with_parent, stop_signals_call
from ingest.collector.app import create_app
from ingest.collector.config import CollectorConfig
from ingest.collector.kafka_sink import KafkaSink

STARTUP_TIMEOUT_S = 30.0
log = logging.getLogger("ingest.collector")


def _server(
    config: CollectorConfig, worker: int = 0
) -> tuple[uvicorn.Server, KafkaSink, KeyStore, Any]:
    """The server, its sink and key store, and its metrics server (None without a port)."""
    keys = KeyStore(config.key_db)
    sink = KafkaSink(config.bootstrap, config.delivery_timeout_s, config.producer_queue_max)
    app = create_app(config, keys, sink)
    server = http_server(app, config.host, config.port)
    metrics = None
    if config.metrics_port is not None:
        port = config.metrics_port + worker if config.metrics_port else 0
        metrics = app.metrics.serve(port, host=config.host)
    return server, sink, keys, metrics


def run_workers(config: CollectorConfig) -> int:
    """Serve from ``config.workers`` forked processes accepting on one socket; each has its own
    Kafka producer and key store connection, and its own rate limiter (limits are per process).

    The parent only binds, forks and waits: if a worker dies, the others are stopped and the
    exit code is non-zero, for the process manager to restart the whole collector.
    """
    if config.workers == 1:
        run(config)
        return 0
    listener = _tcp_listener(config.host, config.port)
    KeyStore(config.key_db).close()  # made once here, so that no two workers make the file
    children = []
    parent = os.getpid()
    for worker in range(config.workers):
        pid = os.fork()
        if pid == 0:  # the worker: nothing of the parent's but the socket and the config
            die_with_parent(parent)
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent passes SIGTERM on
            try:
                run(config, listener, worker)
            finally:
                os._exit(0)
        children.append(pid)
    listener.close()
    log.info("collector workers %s on %s:%d", children, config.host, config.port)

    def stop(*_: object) -> None:
        for child in children:
            try:
                os.kill(child, signal.SIGTERM)
            except ProcessLookupError:
                pass

    with stop_signals_call(stop):
        pid, status = os.wait()
        code = os.waitstatus_to_exitcode(status)
        if code != 0:
            log.error("collector worker %d exited with %d; stopping the others", pid, code)
        stop()
        for child in children:
            if child != pid:
                os.waitpid(child, 0)
        return code


def _tcp_listener(host: str, port: int) -> socket.socket:
    """A listening socket whose protocol says TCP: asyncio sets TCP_NODELAY on accepted
    connections only then (``socket.create_server`` leaves it 0, and every answer then waits
    40 ms for a delayed ACK)."""
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
    )[0]
    listener = socket.socket(family, kind, proto)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(address)
    listener.listen(2048)
    return listener


def run(config: CollectorConfig, listener: socket.socket | None = None, worker: int = 0) -> None:
    """Serve until SIGINT/SIGTERM, then flush what Kafka has not acknowledged yet.

    uvicorn shuts down gracefully on the signal, then raises it again; for SIGTERM that would
    end the process before the producer is flushed, so SIGTERM becomes ``SystemExit`` here.
    """
    server, sink, keys, metrics = _server(config, worker)
    signal.signal(signal.SIGTERM, _exit_quietly)
    try:
        server.run(sockets=[listener] if listener is not None else None)
    finally:
        if metrics is not None:
            metrics.shutdown()
        sink.close()
        keys.close()


def _exit_quietly(*_: object) -> None:
    raise SystemExit(0)


@dataclass
class RunningCollector:
    url: str
    port: int
    server: uvicorn.Server
    thread: threading.Thread
    sink: KafkaSink
    keys: KeyStore
    metrics_server: Any = None
    metrics_url: str | None = None
    """Where the metrics are served, when they are."""

    def stop(self, timeout_s: float = 10.0) -> None:
        self.server.should_exit = True
        self.thread.join(timeout_s)
        if self.metrics_server is not None:
            self.metrics_server.shutdown()
        self.sink.close(timeout_s)
        self.keys.close()


def start_in_thread(config: CollectorConfig) -> RunningCollector:
    """Serve on a background thread; ``config.port=0`` picks a free port."""
    server, sink, keys, metrics = _server(config)
    thread = threading.Thread(target=server.run, name="rtrl-collector", daemon=True)
    thread.start()
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while not server.started and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.01)
    if not server.started:
        if metrics is not None:
            metrics.shutdown()
        sink.close(1.0)
        keys.close()
        raise RuntimeError(f"collector did not start on {config.host}:{config.port}")
    port = server.servers[0].sockets[0].getsockname()[1]
    metrics_url = None if metrics is None else f"http://{config.host}:{metrics.server_port}/metrics"
    return RunningCollector(
        f"http://{config.host}:{port}", port, server, thread, sink, keys, metrics, metrics_url
    )
