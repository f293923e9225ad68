"""Throughput of ``parse_event`` on one core: ``.venv/bin/python bench/contract_validate.py``.

The limit it is divided by is ``orjson.loads`` alone over the same bytes, measured in the
same run: what any validator must pay just to read the JSON. ``parse_event`` (the msgspec fast
path) is shown next to ``parse_event_reference`` (the hand-written checks alone), which gives
the same answers.

Two workloads: what the collector sees (client events with millisecond timestamps, half in UTC,
half with an offset, all normalized) and what the stream sees (collected events, canonical).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import orjson

from ingest.contract.events import EVENT_TYPES
from ingest.contract.ids import uuid7
from ingest.contract.validate import Origin, parse_event, parse_event_reference

_PAYLOADS: dict[str, dict[str, object]] = {
    "interaction.started": {"mode": "agent"},
    "agent.tool_call": {"tool": "read_file", "valid": True},
    "agent.clarifying_question": {},
    "agent.subagent_finished": {"subagent_id": "sub-2", "contributed": False},
    "agent.edit_proposed": {"edit_id": "edit-8a12", "lines_added": 42, "lines_removed": 7},
    "edit.accepted": {"edit_id": "edit-8a12"},
    "edit.rejected": {"edit_id": "edit-8a13"},
    "edit.reverted": {"edit_id": "edit-8a14"},
    "edit.retention": {"edit_id": "edit-8a12", "retained_fraction": 0.857, "after_s": 3600},
    "followup.sent": {"dissatisfied": True},
    "interaction.completed": {"latency_ms": 16634, "output_tokens": 1873},
}
assert tuple(_PAYLOADS) == EVENT_TYPES


def sample_events(origin: Origin) -> list[bytes]:
    """One realistic serialized event per type, in the form ``origin`` implies."""
    events = []
    for number, (event_type, payload) in enumerate(_PAYLOADS.items()):
        event: dict[str, object] = {
            "event_id": uuid7(),
            "type": event_type,
            "schema_version": 1,
            "ts": "2026-11-30T03:23:05.123+01:00",
            "sent_at": "2026-11-30T03:23:06.001+01:00",
            "interaction_id": uuid7(),
            "session_id": "sess-7f3c21d9",
            "user_id": "u_5e884898da28047151d0e56f8dc62927",
            "org_id": "acme-robotics",
            "checkpoint_id": "ckpt-2026-11-29-0042",
            "experiment": {"name": "reward-shaping-v3", "arm": "treatment"},
            "client": {"name": "rtrl-vscode", "version": "1.4.2"},
            "payload": payload,
        }
        if number % 2:  # JavaScript's Date.toISOString() form
            event["ts"], event["sent_at"] = "2026-11-30T02:23:05.123Z", "2026-11-30T02:23:06.001Z"
        if origin == Origin.collected:
            event["ts"] = "2026-11-30T02:23:05.123000Z"
            event["sent_at"] = "2026-11-30T02:23:06.001000Z"
            event["received_at"] = "2026-11-30T02:23:06.120456Z"
        events.append(orjson.dumps(event))
    return events


def events_per_second(
    parse: Callable[..., object], raws: list[bytes], origin: Origin, rounds: int, repeats: int
) -> float:
    """Best of ``repeats`` timings of ``rounds`` passes over ``raws``, in CPU time of this
    process, so that other processes sharing the machine distort the figure less."""
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        for _ in range(rounds):
            for raw in raws:
                parse(raw, origin=origin)
        best = min(best, time.process_time() - start)
    return rounds * len(raws) / best


def decode_only_per_second(raws: list[bytes], rounds: int, repeats: int) -> float:
    """The limit: JSON decoding alone, timed the same way."""
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        for _ in range(rounds):
            for raw in raws:
                orjson.loads(raw)
        best = min(best, time.process_time() - start)
    return rounds * len(raws) / best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5000, help="passes over the 11 events")
    parser.add_argument("--repeats", type=int, default=5, help="timings; the best is reported")
    args = parser.parse_args()
    for origin in Origin:
        raws = sample_events(origin)
        assert [parse_event(raw, origin=origin) for raw in raws] == [
            parse_event_reference(raw, origin=origin) for raw in raws
        ]
        size = sum(map(len, raws)) // len(raws)
        limit = decode_only_per_second(raws, args.rounds, args.repeats)
        rates = {}
        for name, parse in (("fast", parse_event), ("reference", parse_event_reference)):
            rounds = args.rounds if name == "fast" else max(1, args.rounds // 4)
            rates[name] = rate = events_per_second(parse, raws, origin, rounds, args.repeats)
            print(
                f"{origin:>9} {name:>9}: {rate:>9,.0f} events/s ({1e6 / rate:.1f} us/event, "
                f"~{size} B); ratio to orjson.loads ({limit:,.0f}/s) {rate / limit:.3f}"
            )
        print(f"{origin:>9}   speedup: {rates['fast'] / rates['reference']:.1f}x")


if __name__ == "__main__":
    main()
