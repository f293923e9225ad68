"""What every service's Prometheus metrics share: a registry of its own (so tests can run several
services in one process) that also carries the process's own metrics (RSS, CPU, start time: a
start time that moves means a restart), and a way to serve it on a port."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, ProcessCollector, start_http_server


class ServiceMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        ProcessCollector(registry=self.registry)

    def serve(self, port: int, host: str = "0.0.0.0") -> Any:  # noqa: S104 - scraped from outside
        """Serve ``/metrics`` on a background thread; returns the server (``shutdown()``)."""
        server, _ = start_http_server(port, addr=host, registry=self.registry)
        return server
