"""A simulated editor plugin for `rtrl run`: realistic interactions emitted through the real SDK.

The behaviour comes from the seeded workload generator; each event is re-emitted *now*, in
arrival order, with its ids and payload kept, so the collector stamps fresh ``received_at``
times and the stream's windows close within the run.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from typing import Any

from ingest.sdk import Client, SdkConfig
from rewards.workload import generate_workload

log = logging.getLogger("rtrl.run")

# What an event from the generator carries that the SDK or the collector sets instead.
_SET_ELSEWHERE = {"received_at", "sent_at", "org_id", "client", "schema_version", "type"}


def editor_events(n_interactions: int, seed: int) -> list[dict[str, Any]]:
    """The simulated plugin's interactions: the same arguments give the same events."""
    return generate_workload(n_interactions, seed=seed, span_s=60)


def emit_workload(config: SdkConfig, n_interactions: int, seed: int, pace_s: float) -> Counter:
    """Emit the interactions' events through the SDK over about ``pace_s`` seconds; return the
    SDK's answers by kind (queued, invalid, ...)."""
    events = editor_events(n_interactions, seed)
    answers: Counter = Counter()
    with Client(config) as client:
        step = pace_s / max(1, len(events))
        for i, event in enumerate(events):
            answers[str(_emit(client, event))] += 1
            if step and i % 100 == 0:
                time.sleep(step * 100)
        left = client.flush(timeout=60)
        counters = client.counters()
    log.info(
        "editor: emitted %d events (%s); sdk counters %s; %d left unsent",
        len(events),
        dict(answers),
        counters,
        left,
    )
    return answers


def _emit(client: Client, event: dict[str, Any]) -> Any:
    fields = {k: v for k, v in event.items() if k not in _SET_ELSEWHERE}
    fields["ts"] = None  # happened now, by this client's clock
    return client.emit(event["type"], fields.pop("interaction_id"), fields.pop("payload"), **fields)
