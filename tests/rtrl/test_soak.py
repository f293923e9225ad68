"""The soak, short: the production topology (`rtrl up`, every service a process under
supervisord) under steady simulated traffic, while the trainer is SIGKILLed, the warehouse sink
SIGKILLed and the stream worker frozen for 15 s (SIGSTOP: starved; a CPU hog would starve the
suite's other worker too); every request is answered or refused with a reason (none fails),
every accepted event is archived and counted in exactly one reward record (or in the late
archive), every answered interaction has its record, and no round is trained twice on the same
batches. These are read once the topology has stopped; how long the records took to land (its
liveness) is printed, not asserted. The broker's stop is the long form's (``bench/soak.py``),
and the sink's own test (``tests/warehouse/test_sink_broker_restart.py``) holds the sink across
it.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.soak import Soak


def test_the_topology_keeps_its_invariants_through_its_faults(tmp_path: Path) -> None:
    soak = Soak(tmp_path)
    try:
        soak.start()
        soak.run_traffic()
        landed_s = soak.wait_for_records(120)
    finally:
        code = soak.stop()
    figures = soak.invariants()  # after every service flushed what it held at the stop
    print(json.dumps({"records_landed_after_s": landed_s, **figures}, indent=1))
    assert figures["broken"] == [], figures["broken"]
    assert figures["interactions_answered"] >= 30  # the traffic flowed through every fault
    assert [f["what"] for f in figures["faults"]] == [
        "kill the trainer",
        "kill the sink",
        "freeze the stream worker",
    ]
    assert all(f["answered"] > 0 for f in figures["faults"]), figures["faults"]
    assert code == 0
    for name in ("broker", "collector", "stream", "sink", "batches", "trainer", "gateway"):
        assert (soak.data / "logs" / f"{name}.log").stat().st_size > 0, name
    trainer_log = (soak.data / "logs" / "trainer.log").read_text()
    assert trainer_log.count("watching batches") >= 2  # started again after its kill
