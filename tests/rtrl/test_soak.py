"""The soak, short: the production topology (`rtrl up`, every service a process under
supervisord) under steady simulated traffic, while the trainer is killed, the broker stopped for
15 s and the machine starved by a CPU hog; every request is answered, every accepted event is
archived and counted in exactly one reward record (or in the late archive), every answered
interaction has its record, and no round is trained twice on the same batches. The long form,
with SmolLM2 and figures, is ``bench/soak.py``."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.soak import Soak


def test_the_topology_keeps_its_invariants_through_its_faults(tmp_path: Path) -> None:
    soak = Soak(tmp_path)
    try:
        soak.start()
        soak.run_traffic()
        soak.wait_for_records()
        figures = soak.invariants()
    finally:
        code = soak.stop()
    print(json.dumps(figures, indent=1))
    assert figures["broken"] == [], figures["broken"]
    assert figures["interactions_answered"] >= 30  # the traffic flowed through every fault
    assert [f["what"] for f in figures["faults"]] == [
        "kill the trainer",
        "stop the broker",
        "starve the machine",
    ]
    assert all(f["answered"] > 0 for f in figures["faults"]), figures["faults"]
    assert code == 0
    for name in ("broker", "collector", "stream", "sink", "batches", "trainer", "gateway"):
        assert (soak.data / "logs" / f"{name}.log").stat().st_size > 0, name
    trainer_log = (soak.data / "logs" / "trainer.log").read_text()
    assert trainer_log.count("watching batches") >= 2  # started again after its kill
