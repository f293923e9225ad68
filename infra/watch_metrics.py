"""What a `--watch` service that has no metrics of its own tells a scraper and the live page:
its passes by outcome (``worked``: it did something, ``idle``: nothing was due, ``given_up``: a
passing failure, tried again at the next look), when the last one ended and how long it took,
and what its last pass made (``made{what}``: batches offered, canary looks, ...). A service that
died shows as a target that stopped answering; one that restarted, as a start time that moved.

>>> m = WatchMetrics("batches")
>>> m.passed("worked", 2.5, {"offered": 3})
>>> m.registry.get_sample_value("rtrl_batches_passes_total", {"outcome": "worked"})
1.0
>>> m.registry.get_sample_value("rtrl_batches_made", {"what": "offered"})
3.0
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from prometheus_client import Counter, Gauge

from infra.metrics import ServiceMetrics

OUTCOMES = ("worked", "idle", "given_up")


class WatchMetrics(ServiceMetrics):
    def __init__(self, service: str) -> None:
        super().__init__()
        r = self.registry
        self.passes = Counter(f"rtrl_{service}_passes", "passes by outcome", ["outcome"],
                              registry=r)  # fmt: skip
        self.last_pass = Gauge(f"rtrl_{service}_last_pass_timestamp_seconds",
                               "when the last pass ended (Unix time)", registry=r)  # fmt: skip
        self.pass_seconds = Gauge(f"rtrl_{service}_last_pass_seconds",
                                  "how long the last pass took", registry=r)  # fmt: skip
        self.made = Gauge(f"rtrl_{service}_made", "what the last pass made, by kind", ["what"],
                          registry=r)  # fmt: skip
        for outcome in OUTCOMES:
            self.passes.labels(outcome)

    def passed(self, outcome: str, seconds: float, made: Mapping[str, float] = {}) -> None:
        self.passes.labels(outcome).inc()
        self.last_pass.set(time.time())
        self.pass_seconds.set(seconds)
        for what, value in made.items():
            self.made.labels(what).set(value)
