"""Properties of the reward function that must hold for every interaction, not just chosen ones."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from rewards.config import RewardConfig
from rewards.function import compute_record
from rewards.workload import make_event

CONFIG = RewardConfig()
# No per-example deadline: a loaded, shared machine must not fail a property on timing.
unhurried = settings(deadline=None)
T0 = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
W, R = CONFIG.window_s, CONFIG.late_s
EXPIRES_AT = W + R  # seconds after T0, for interactions whose first event arrives at T0


def at(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).isoformat(timespec="microseconds")


TYPES = (
    "interaction.started", "agent.tool_call", "agent.clarifying_question",
    "agent.subagent_finished", "agent.edit_proposed", "edit.accepted", "edit.rejected",
    "edit.reverted", "edit.retention", "followup.sent", "interaction.completed",
)  # fmt: skip


def payload_for(type_: str, edit_id: str, flag: bool, number: int) -> dict[str, Any]:
    payloads: dict[str, dict[str, Any]] = {
        "interaction.started": {},
        "agent.tool_call": {"tool": "grep", "valid": flag},
        "agent.clarifying_question": {},
        "agent.subagent_finished": {"subagent_id": f"s{number}", "contributed": flag},
        "agent.edit_proposed": {"edit_id": edit_id, "lines_added": number, "lines_removed": 0},
        "edit.accepted": {"edit_id": edit_id},
        "edit.rejected": {"edit_id": edit_id},
        "edit.reverted": {"edit_id": edit_id},
        "edit.retention": {"edit_id": edit_id, "retained_fraction": number / 100, "after_s": 60},
        "followup.sent": {"dissatisfied": flag},
        "interaction.completed": {"latency_ms": number * 300, "output_tokens": 5},
    }
    return payloads[type_]


# Arrival offsets cluster around the window's edges so that late and expired events are common.
received_offsets = st.one_of(
    st.integers(0, W - 1),
    st.sampled_from([W - 1, W, W + 1, EXPIRES_AT - 1, EXPIRES_AT, EXPIRES_AT + 1]),
    st.integers(W, EXPIRES_AT + 600),
)
event_specs = st.tuples(
    st.sampled_from(TYPES),
    st.sampled_from(["x", "y", "z"]),
    received_offsets,
    st.integers(-120, 120),  # client clock skew
    st.booleans(),
    st.integers(0, 100),
    st.booleans(),  # privacy mode (rarely set, see below)
)


@st.composite
def interactions(draw) -> list[dict]:
    specs = draw(st.lists(event_specs, min_size=0, max_size=14))
    privacy_allowed = draw(st.integers(0, 4)) == 0
    events = [make_event("e-open", "interaction.started", at(0))]
    for i, (type_, edit_id, received, skew, flag, number, private) in enumerate(specs):
        extra: dict[str, Any] = {"privacy_mode": True} if private and privacy_allowed else {}
        events.append(
            make_event(
                f"e{i:02d}",
                type_,
                at(received),
                payload_for(type_, edit_id, flag, number),
                ts=at(received + skew),
                **extra,
            )  # fmt: skip
        )
    return events


@unhurried
@given(interactions(), st.randoms(use_true_random=False))
def test_arrival_order_never_changes_the_record(events, rng):
    shuffled = list(events)
    rng.shuffle(shuffled)
    assert compute_record(shuffled, CONFIG) == compute_record(events, CONFIG)


@unhurried
@given(interactions(), st.data())
def test_redelivered_copies_never_change_the_record(events, data):
    redelivered = data.draw(st.lists(st.sampled_from(events), max_size=6))
    record = compute_record(events + [dict(e) for e in redelivered], CONFIG)
    assert record == compute_record(events, CONFIG)


@unhurried
@given(interactions(), st.data())
def test_extra_copies_change_only_n_duplicates(events, data):
    originals = data.draw(st.lists(st.sampled_from(events), min_size=1, max_size=5))
    delays = data.draw(st.lists(st.integers(1, 4000), min_size=len(originals),
                                max_size=len(originals)))  # fmt: skip
    copies, counted = [], set()
    for original, delay in zip(originals, delays, strict=True):
        received = datetime.fromisoformat(original["received_at"]) + timedelta(seconds=delay)
        copies.append(dict(original, received_at=received.isoformat()))
        if received < T0 + timedelta(seconds=EXPIRES_AT):
            # the same copy drawn twice is one physical copy: count (event_id, received_at) once
            counted.add((original["event_id"], received))
    expected_extra = len(counted)
    base = compute_record(events, CONFIG)
    record = compute_record(events + copies, CONFIG)
    assert record == dataclasses.replace(base, n_duplicates=base.n_duplicates + expected_extra)


@unhurried
@given(interactions())
def test_reward_is_bounded_by_the_terms_limits(events):
    record = compute_record(events, CONFIG)
    if record.status != "scored":
        assert record.reward is None
        return
    assert CONFIG.reject <= record.r_edit <= CONFIG.accept + CONFIG.retain_weight
    assert CONFIG.invalid_tool_floor <= record.r_tool <= 0.0
    assert CONFIG.clarify_floor <= record.r_clarify <= 0.0
    assert CONFIG.latency <= record.r_latency <= 0.0
    assert CONFIG.followup_dissatisfied <= record.r_followup <= 0.0
    low = CONFIG.reject + CONFIG.invalid_tool_floor + CONFIG.clarify_floor + CONFIG.latency
    assert low + CONFIG.followup_dissatisfied <= record.reward <= 2.0
    assert record.reward == round(record.reward, CONFIG.reward_decimals)


@unhurried
@given(interactions())
def test_counts_are_consistent(events):
    record = compute_record(events, CONFIG)
    assert record.n_events == len(record.event_ids) == len(set(record.event_ids))
    assert record.n_accepted + record.n_rejected <= record.n_edits
    assert record.n_reverted <= record.n_accepted
    assert record.n_subagents_unused <= record.n_subagents
    assert record.n_events + record.n_late <= len({e["event_id"] for e in events})


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(sorted(RewardConfig.model_fields)),
    st.integers(1, 50),
)
def test_config_version_is_stable_and_changes_with_any_field(field, step):
    base = RewardConfig()
    assert RewardConfig().reward_version == base.reward_version
    value = getattr(base, field)
    if field == "flaw":  # the one non-numeric field: any flaw renames the configuration
        changed = ("invalid-tools-discarded", "free-deferral")[step % 2]
    elif field in ("remember_closed_s", "reward_decimals"):
        changed = value + step if field == "remember_closed_s" else value + 1 + step % 6
    elif isinstance(value, int):
        changed = max(value - step, 1) if value - step >= 1 else value + step
    elif field in ("accept", "retain_weight"):
        changed = value + step / 100
    else:
        changed = value - step / 100
    other = base.model_copy(update={field: changed})
    other = RewardConfig.model_validate(other.model_dump())
    assert other.reward_version != base.reward_version
    assert other.reward_version.startswith("v1-") and len(other.reward_version) == 11
