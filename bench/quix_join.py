"""The stream join written with Quix Streams, for ``bench/stream_join.py`` to compare against.

Run by the benchmark in its own virtualenv (Quix Streams 3.28 needs confluent-kafka < 2.13 and
an older pydantic than the project pins; ``bench/requirements-quix.txt``). Same input, same
validation (``streams.intake.read_message``), the same kept fields per copy and the same
``compute_record``. Per event, the interaction's copies live in Quix's state (RocksDB with a
changelog topic, at-least-once, commits every ``--commit-interval`` seconds). Quix has no
timers, so a record is computed and written to the output topic when an
``interaction.completed`` event arrives (about one per interaction, as the worker's records
are), rather than when a partition clock passes the window.

Prints one line: ``quix events=N seconds=S rate=R cpu_us=C`` (first event to last, in the
process; C is the process's CPU time per event, every thread).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import orjson

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from quixstreams import Application, State  # noqa: E402
from quixstreams.kafka.configuration import ConnectionConfig  # noqa: E402

from infra.settings import client  # noqa: E402
from rewards.config import RewardConfig  # noqa: E402
from rewards.function import compute_record  # noqa: E402
from streams.intake import Rejected, read_message  # noqa: E402
from streams.state import KEPT_FIELDS  # noqa: E402

CLOSING_TYPE = "interaction.completed"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--input", required=True)
    ap.add_argument("--output", required=True)
    ap.add_argument("--total", type=int, required=True)
    ap.add_argument("--state-dir", type=Path, required=True)
    ap.add_argument("--commit-interval", type=float, default=5.0)
    args = ap.parse_args()

    app = Application(
        broker_address=ConnectionConfig.from_librdkafka_dict(client(args.bootstrap)),
        consumer_group=f"quix-bench-{time.time_ns()}",
        auto_offset_reset="earliest",
        commit_interval=args.commit_interval,
        state_dir=str(args.state_dir),
    )
    source = app.topic(args.input, key_deserializer="bytes", value_deserializer="bytes")
    sink = app.topic(args.output, key_serializer="bytes", value_serializer="bytes")
    config = RewardConfig()
    seen = {"n": 0, "first": 0.0, "last": 0.0, "cpu_first": 0.0, "cpu_last": 0.0}

    def join(value: bytes, key: bytes, _ts: int, _headers: Any, state: State) -> bytes | None:
        if not seen["n"]:
            seen["first"], seen["cpu_first"] = time.perf_counter(), time.process_time()
        seen["n"] += 1
        if seen["n"] >= args.total:
            seen["last"], seen["cpu_last"] = time.perf_counter(), time.process_time()
            app.stop()
        item = read_message(key, value)
        if isinstance(item, Rejected):
            return None
        event = item.event
        copies = state.get("copies") or []
        copies.append({k: event[k] for k in KEPT_FIELDS if k in event})
        state.set("copies", copies)
        if event["type"] != CLOSING_TYPE:
            return None
        return orjson.dumps(compute_record(copies, config).to_json_dict())

    sdf = app.dataframe(source)
    sdf = sdf.apply(join, stateful=True, metadata=True).filter(lambda v: v is not None)
    sdf.to_topic(sink)
    app.run()
    seconds = max(seen["last"] - seen["first"], 1e-9)
    cpu_us = (seen["cpu_last"] - seen["cpu_first"]) / max(seen["n"] - 1, 1) * 1e6
    print(
        f"quix events={seen['n']} seconds={seconds:.3f} rate={seen['n'] / seconds:.0f} "
        f"cpu_us={cpu_us:.1f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
