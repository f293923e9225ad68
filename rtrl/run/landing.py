"""How a round of `rtrl run` reaches the trainer: wait for its reward windows to close, then land
the topics in the warehouse, build the catalog and offer the quality-gated batches, each as its
own `rtrl` subcommand (every world's loop lands the same way)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rtrl.run.clock import CycleClock
from rtrl.run.procs import run_stage

log = logging.getLogger("rtrl.run")


@dataclass(frozen=True)
class Landing:
    """The run's warehouse stages: its Kafka options, warehouse, consumer groups' run id, logs,
    and how long a round's windows and late periods stay open after its last event."""

    kafka: list[str]
    warehouse: Path
    run_id: str
    logs: Path
    settle_s: float

    def land(self, clock: CycleClock, deliver: Callable[[], None],
             since: float | None) -> None:  # fmt: skip
        """``deliver`` (the gateway's rollouts to Kafka), wait for the windows of what was
        played until ``since`` (``time.monotonic()``), then sink, catalog and batches."""
        wh = ["--warehouse", str(self.warehouse)]
        with clock.stage("settle"):
            deliver()
            settle(self.settle_s, since=since)
        for name, stage_args in (
            ("sink", ["warehouse", "sink", *self.kafka, *wh, "--once", "--group-id",
                      f"{self.run_id}-sink"]),
            ("catalog", ["warehouse", "catalog", *wh]),
            ("batches", ["batches", "build", *self.kafka, *wh, "--settle-s", "0"]),
        ):  # fmt: skip
            with clock.stage(name):
                out = run_stage(name, stage_args, self.logs / f"{name}.log")
            print(out, end="")


def settle(seconds: float, since: float | None = None) -> None:
    """Wait until ``seconds`` after ``since`` (``time.monotonic()`` of the last event sent;
    default now): what ran in between, such as the held-out evals, counts toward the wait."""
    left = seconds if since is None else seconds - (time.monotonic() - since)
    if left <= 0:
        log.info("the windows and their late periods closed while the loop worked")
        return
    log.info("waiting %.0fs for the windows and their late periods to close", left)
    time.sleep(left)
