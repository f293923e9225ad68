"""Assemble and run a collector: key store + Kafka sink + app under uvicorn.

``run`` serves in the foreground (the CLI); ``start_in_thread`` serves on a background thread of
the calling process (tests, benchmarks). Both flush the producer when the server stops.
"""

from __future__ import annotations

import signal
import threading
import time
from dataclasses import dataclass

import uvicorn

from ingest.collector.app import create_app
from ingest.collector.config import CollectorConfig
from ingest.collector.kafka_sink import KafkaSink
from ingest.collector.keys import KeyStore

STARTUP_TIMEOUT_S = 30.0


def _server(config: CollectorConfig) -> tuple[uvicorn.Server, KafkaSink, KeyStore]:
    keys = KeyStore(config.key_db)
    sink = KafkaSink(config.bootstrap, config.delivery_timeout_s, config.producer_queue_max)
    app = create_app(config, keys, sink)
    server = uvicorn.Server(uvicorn.Config(app, host=config.host, port=config.port,
                                           log_level="warning", access_log=False,
                                           lifespan="off", loop="asyncio", http="h11"))
    return server, sink, keys


def run(config: CollectorConfig) -> None:
    """Serve until SIGINT/SIGTERM, then flush what Kafka has not acknowledged yet.

    uvicorn shuts down gracefully on the signal, then raises it again; for SIGTERM that would
    end the process before the producer is flushed, so SIGTERM becomes ``SystemExit`` here.
    """
    server, sink, keys = _server(config)
    signal.signal(signal.SIGTERM, _exit_quietly)
    try:
        server.run()
    finally:
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

    def stop(self, timeout_s: float = 10.0) -> None:
        self.server.should_exit = True
        self.thread.join(timeout_s)
        self.sink.close(timeout_s)
        self.keys.close()


def start_in_thread(config: CollectorConfig) -> RunningCollector:
    """Serve on a background thread; ``config.port=0`` picks a free port."""
    server, sink, keys = _server(config)
    thread = threading.Thread(target=server.run, name="rtrl-collector", daemon=True)
    thread.start()
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while not server.started and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.01)
    if not server.started:
        sink.close(1.0)
        keys.close()
        raise RuntimeError(f"collector did not start on {config.host}:{config.port}")
    port = server.servers[0].sockets[0].getsockname()[1]
    return RunningCollector(f"http://{config.host}:{port}", port, server, thread, sink, keys)
