"""The closing A/B test of `rtrl run` at a small scale, from the gateway to the A/B report: the
default users ask a real `rtrl serve` with the experiment's split, keep or revert the edits they
accepted a few seconds later and follow up dissatisfied, report the gateway's timing as the
latency; their events, scored by the one reward function and landed in the warehouse, give the
report all three of the seed's metrics (edits kept, dissatisfied follow-ups, latency) with a
value and a 95 % interval in each arm."""

from __future__ import annotations

import math
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from models.sampling import SamplingParams
from rewards.config import RewardConfig
from rewards.function import compute_record
from rtrl.run.ab_round import EXPERIMENT, run_final_ab
from rtrl.run.gateway import GatewaySetup
from rtrl.worlds.token_users import Taste
from rtrl.worlds.token_world import LOOK_AGAIN_S
from tests.support.warehouse import land
from warehouse.catalog import build_catalog
from warehouse.report import ab_report
from warehouse.store import Store

SEED_METRICS = ("kept_share", "dissatisfied_rate", "latency_mean_ms", "latency_p50_ms")


class EventLog:
    """Stands in for the SDK's client (tested on its own): each event as the collector would
    land it, stamped with the time it was sent."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def emit(self, kind: str, interaction_id: str, payload: dict, **fields: Any) -> None:
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        self.events.append({"event_id": f"ev{len(self.events)}", "type": kind,
                            "schema_version": 1, "ts": now, "received_at": now,
                            "interaction_id": interaction_id, "org_id": "acme",
                            "payload": payload, **fields})  # fmt: skip


def test_the_closing_ab_reports_kept_edits_followups_and_latency(
    tmp_path: Path, ab_gateway: GatewaySetup
) -> None:
    log = EventLog()
    users = 150
    run_final_ab(ab_gateway, "t-0000", "t-0001", log, Taste(432), users,  # type: ignore[arg-type]
                 SamplingParams(max_tokens=8), tmp_path / "gateway.log")  # fmt: skip

    by_interaction: dict[str, list[dict]] = defaultdict(list)
    for event in log.events:
        by_interaction[event["interaction_id"]].append(event)
    kinds = {e["type"] for e in log.events}
    assert {"edit.retention", "edit.reverted", "followup.sent"} <= kinds
    # the second look comes a few seconds after the interaction, inside its window
    for events in by_interaction.values():
        first = datetime.fromisoformat(events[0]["ts"])
        for event in events:
            late = (datetime.fromisoformat(event["ts"]) - first).total_seconds()
            if event["type"] in ("edit.retention", "edit.reverted"):
                # after its own user's reaction, not after the whole A/B's
                # (rtrl.worlds.http_users.Later)
                assert LOOK_AGAIN_S <= late < LOOK_AGAIN_S + 2.0, late
    latencies = [e["payload"]["latency_ms"] for e in log.events
                 if e["type"] == "interaction.completed"]  # fmt: skip
    assert len(set(latencies)) > 10  # the gateway's timing, not a function of the length alone

    store = Store(str(tmp_path / "warehouse"))
    records = [compute_record(evs, RewardConfig()) for evs in by_interaction.values()]
    assert all(r.status == "scored" for r in records)
    land(store, "events", log.events)
    land(store, "rewards", [r.to_json_dict() for r in records], partition=1)
    build_catalog(store)
    rows = {r.metric: r for r in ab_report(store, EXPERIMENT) if r.control_arm == "control"}
    assert set(SEED_METRICS) <= set(rows)
    for metric in SEED_METRICS:
        row = rows[metric]
        figures = (row.control, row.value, row.relative_change, row.ci_low, row.ci_high,
                   row.p_value)  # fmt: skip
        assert all(f is not None and math.isfinite(f) for f in figures), (metric, row)
        assert row.ci_low < row.relative_change < row.ci_high, (metric, row)  # type: ignore[operator]
    assert 0 < rows["kept_share"].control < 1 and 0 < rows["dissatisfied_rate"].control < 1  # type: ignore[operator]
