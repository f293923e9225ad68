"""Pieces of the console's tests and benchmark: `rtrl console` as a child process (the real
command), and a canary's live A/B landed in a warehouse the way the sink lands it."""

from __future__ import annotations

import random
from pathlib import Path

from rewards.config import RewardConfig
from rewards.function import compute_record
from tests.support.child import REPO as REPO
from tests.support.child import answers, start_rtrl, stop
from tests.support.events import events_of
from tests.support.kafka import free_port_block
from tests.support.warehouse import land
from warehouse.catalog import build_catalog
from warehouse.store import Store


def land_canary(store: Store, users: range, canary: str, parent: str, seed: int) -> str:
    """Two interactions for each user of ``canary``'s experiment, every other user on the
    canary; the rewards as the stream computes them, landed as one sink file; the catalog
    rebuilt. Returns the catalog's path."""
    rng = random.Random(seed)
    records = []
    for n in users:
        arm = "canary" if n % 2 else "parent"
        for k in range(2):
            checkpoint = canary if arm == "canary" else parent
            events = events_of(f"{seed}-{n}-{k}", f"u{n:04d}", checkpoint,
                               f"canary-{canary}:{arm}", rng.random() < 0.6, 2 * n + k)  # fmt: skip
            records.append(compute_record(events, RewardConfig()).to_json_dict())
    land(store, "rewards", records, partition=seed)
    return build_catalog(store)


class ConsoleProcess:
    """`rtrl console ARGS` on a free port, until :meth:`stop`."""

    def __init__(self, args: list[str], log: Path) -> None:
        self.port = free_port_block(1)
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        self.proc, self._out = start_rtrl(["console", "--port", str(self.port), *args], log)
        if not answers(self.proc, f"{self.url}/api/snapshot", timeout_s=60, pause_s=0.1):
            self.stop()
            raise RuntimeError(f"rtrl console did not come up:\n{log.read_text()[-3000:]}")

    def stop(self) -> int:
        return stop(self.proc, self._out, timeout_s=20)
