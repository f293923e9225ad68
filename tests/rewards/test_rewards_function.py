"""One test per rule of reward spec v1, on hand-written interactions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from rewards.config import RewardConfig
from rewards.function import compute_record
from rewards.workload import make_event

CONFIG = RewardConfig()
T0 = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)


def at(seconds: float = 0.0, micros: int = 0) -> str:
    """RFC 3339 of T0 + seconds (+ micros)."""
    moment = T0 + timedelta(seconds=seconds, microseconds=micros)
    return moment.isoformat(timespec="microseconds").replace("+00:00", "Z")


def ev(event_id: str, type_: str, seconds: float = 0.0, payload=None, **kw):
    return make_event(event_id, type_, at(seconds), payload, **kw)


def started(seconds: float = 0.0, event_id: str = "a-start", **kw):
    return ev(event_id, "interaction.started", seconds, **kw)


def proposed(edit_id: str, seconds: float, event_id: str | None = None):
    payload = {"edit_id": edit_id, "lines_added": 1, "lines_removed": 0}
    return ev(event_id or f"p-{edit_id}-{seconds}", "agent.edit_proposed", seconds, payload)


def edit(kind: str, edit_id: str, seconds: float, event_id: str | None = None, **payload):
    return ev(event_id or f"{kind}-{edit_id}-{seconds}", f"edit.{kind}", seconds,
              {"edit_id": edit_id, **payload})  # fmt: skip


def retention(edit_id: str, seconds: float, fraction: float):
    return edit("retention", edit_id, seconds, retained_fraction=fraction, after_s=300)


def tool(event_id: str, seconds: float, valid: bool = True):
    return ev(event_id, "agent.tool_call", seconds, {"tool": "grep", "valid": valid})


def completed(event_id: str, seconds: float, latency_ms: int):
    return ev(event_id, "interaction.completed", seconds,
              {"latency_ms": latency_ms, "output_tokens": 1})  # fmt: skip


W, R = CONFIG.window_s, CONFIG.late_s


# --- the window -----------------------------------------------------------------------------


def test_window_opens_at_smallest_received_at_and_lasts_w():
    record = compute_record([tool("t", 5), started(0)], CONFIG)
    assert record.t_open == T0
    assert record.t_close == T0 + timedelta(seconds=W)


def test_event_just_before_t_close_is_in_the_window():
    record = compute_record([started(), tool("t", W - 1e-6, valid=False)], CONFIG)
    assert record.n_late == 0 and record.n_invalid_tool_calls == 1
    assert record.event_ids == ("a-start", "t")


def test_event_at_t_close_is_late_and_changes_no_term():
    before = compute_record([started(), tool("t", 1)], CONFIG)
    record = compute_record([started(), tool("t", 1), tool("late", W, valid=False)], CONFIG)
    assert record.n_late == 1
    assert record.n_invalid_tool_calls == 0 and record.r_tool == 0.0
    assert record.event_ids == before.event_ids and record.reward == before.reward


def test_late_until_just_before_t_close_plus_r_then_expired():
    late = compute_record([started(), tool("x", W + R - 1e-6)], CONFIG)
    expired = compute_record([started(), tool("x", W + R)], CONFIG)
    assert late.n_late == 1
    assert expired.n_late == 0 and expired.n_events == 1 and expired.n_duplicates == 0
    assert expired == compute_record([started()], CONFIG)


def test_late_events_are_counted_once_each():
    record = compute_record([started(), tool("x", W + 5), tool("x", W + 9), tool("y", W + 1)],
                            CONFIG)  # fmt: skip
    assert record.n_late == 2 and record.n_duplicates == 1


def test_in_window_uses_received_at_not_client_ts():
    skewed = make_event("t", "agent.tool_call", at(W + 10), {"tool": "g", "valid": False},
                        ts=at(1))  # fmt: skip
    record = compute_record([started(), skewed], CONFIG)
    assert record.n_late == 1 and record.n_invalid_tool_calls == 0


def test_tool_calls_count_valid_and_invalid_in_the_window_and_no_late_one():
    events = [started(), tool("v1", 1), tool("v2", 2), tool("x1", 3, valid=False),
              tool("late-valid", W + 1), tool("late-invalid", W + 2, valid=False),
              dict(tool("v1", 1), received_at=at(4))]  # fmt: skip
    record = compute_record(events, CONFIG)
    assert (record.n_tool_calls, record.n_invalid_tool_calls) == (3, 1)
    assert record.n_late == 2 and record.n_duplicates == 1


# --- duplicates -----------------------------------------------------------------------------


def test_first_received_copy_wins_and_others_count_as_duplicates():
    first = tool("t", 2, valid=False)
    second = dict(tool("t", 1, valid=True), received_at=at(30))
    record = compute_record([second, started(), first], CONFIG)
    assert record.n_invalid_tool_calls == 1  # the copy received first
    assert record.n_duplicates == 1 and record.n_events == 2


def test_late_copy_is_a_duplicate_expired_copy_is_not():
    original = tool("t", 2)
    late_copy = dict(original, received_at=at(W + 1))
    expired_copy = dict(original, received_at=at(W + R + 1))
    record = compute_record([started(), original, late_copy, expired_copy], CONFIG)
    assert record.n_duplicates == 1 and record.n_late == 0


def test_redelivered_copy_with_same_received_at_is_not_a_duplicate():
    events = [started(), tool("t", 2)]
    assert compute_record(events + [dict(events[1])], CONFIG) == compute_record(events, CONFIG)


# --- edits, orphans, decisions ----------------------------------------------------------------


def test_orphan_edit_events_are_ignored_and_counted():
    record = compute_record([started(), edit("accepted", "ghost", 3), proposed("x", 1)], CONFIG)
    assert record.n_orphans == 1 and record.n_accepted == 0
    assert record.status == "censored" and record.censor_reason == "no_outcome"


def test_edit_proposed_twice_is_one_edit():
    events = [started(), proposed("x", 1, "p1"), proposed("x", 2, "p2"), edit("accepted", "x", 3)]
    record = compute_record(events, CONFIG)
    assert record.n_edits == 1 and record.r_edit == 1.0 and record.n_events == 4


def test_decision_is_the_last_in_ts_order_not_arrival_order():
    accepted = edit("accepted", "x", 5)
    rejected = make_event("z-rej", "edit.rejected", at(4), {"edit_id": "x"}, ts=at(9))
    record = compute_record([started(), proposed("x", 1), accepted, rejected], CONFIG)
    assert record.n_rejected == 1 and record.n_accepted == 0 and record.r_edit == -0.5


def test_decision_tie_in_ts_is_broken_by_event_id():
    events = [started(), proposed("x", 1), edit("rejected", "x", 5, "d-2"),
              edit("accepted", "x", 5, "d-1")]  # fmt: skip
    record = compute_record(events, CONFIG)
    assert record.n_rejected == 1 and record.event_ids[-2:] == ("d-1", "d-2")


def test_undecided_edit_scores_zero_and_counts_in_the_mean():
    events = [started(), proposed("x", 1), proposed("y", 2), edit("accepted", "x", 3)]
    record = compute_record(events, CONFIG)
    assert record.n_edits == 2 and record.r_edit == 0.5


def test_revert_after_acceptance_cancels_retention():
    events = [started(), proposed("x", 1), edit("accepted", "x", 3), retention("x", 4, 0.9),
              edit("reverted", "x", 5)]  # fmt: skip
    record = compute_record(events, CONFIG)
    assert record.n_reverted == 1 and record.r_edit == 0.0  # 1.0 + 0.0 - 1.0


def test_revert_before_acceptance_does_not_apply():
    events = [started(), proposed("x", 1), edit("reverted", "x", 2), edit("accepted", "x", 3),
              retention("x", 4, 0.5)]  # fmt: skip
    record = compute_record(events, CONFIG)
    assert record.n_reverted == 0 and record.r_edit == 1.5


def test_revert_of_a_rejected_edit_does_not_apply():
    events = [started(), proposed("x", 1), edit("rejected", "x", 2), edit("reverted", "x", 3)]
    record = compute_record(events, CONFIG)
    assert record.n_reverted == 0 and record.r_edit == -0.5


def test_retention_uses_the_last_measurement():
    events = [started(), proposed("x", 1), edit("accepted", "x", 2), retention("x", 9, 0.25),
              retention("x", 5, 0.75)]  # fmt: skip
    assert compute_record(events, CONFIG).r_edit == 1.25


def test_retention_of_an_unaccepted_edit_gives_nothing_but_scores_the_interaction():
    events = [started(), proposed("x", 1), retention("x", 5, 0.75)]
    record = compute_record(events, CONFIG)
    assert record.status == "scored" and record.r_edit == 0.0


# --- other terms ------------------------------------------------------------------------------


def test_followup_dissatisfied_is_penalised_once():
    events = [started(), ev("f1", "followup.sent", 2, {"dissatisfied": False}),
              ev("f2", "followup.sent", 3, {"dissatisfied": True}),
              ev("f3", "followup.sent", 4, {"dissatisfied": True})]  # fmt: skip
    record = compute_record(events, CONFIG)
    assert record.r_followup == -1.0 and record.dissatisfied is True


def test_invalid_tool_calls_are_floored_but_counted_uncapped():
    events = [started()] + [tool(f"t{i}", i + 1, valid=False) for i in range(6)]
    record = compute_record(events + [tool("ok", 9)], CONFIG)
    assert record.r_tool == -2.0 and record.n_invalid_tool_calls == 6


def test_clarify_only_without_edits_and_floored():
    asks = [ev(f"q{i}", "agent.clarifying_question", i + 1) for i in range(5)]
    without = compute_record([started()] + asks, CONFIG)
    assert without.r_clarify == -1.0 and without.n_clarifying == 5
    assert compute_record([started()] + asks[:2], CONFIG).r_clarify == -0.5
    with_edit = compute_record([started(), proposed("x", 9)] + asks, CONFIG)
    assert with_edit.r_clarify == 0.0


def test_latency_of_the_last_completion_capped_at_one_scale():
    record = compute_record([started(), completed("c1", 2, 2000), completed("c2", 3, 25_000)],
                            CONFIG)  # fmt: skip
    assert record.r_latency == -0.1
    record = compute_record([started(), completed("c1", 3, 25_000), completed("c2", 2, 2000)],
                            CONFIG)  # fmt: skip
    assert record.r_latency == -0.1
    assert compute_record([started(), completed("c", 2, 5000)], CONFIG).r_latency == -0.05


def test_only_the_sum_is_rounded():
    events = [started(), proposed("x", 1), edit("accepted", "x", 2), retention("x", 3, 1 / 3),
              completed("c", 4, 1234)]  # fmt: skip
    record = compute_record(events, CONFIG)
    assert record.r_edit == 1 + 1 / 3
    assert record.r_latency == -0.1 * 0.1234
    assert record.reward == round(1 + 1 / 3 - 0.01234, 6) == 1.320993


# --- status, identity, lineage ----------------------------------------------------------------


def test_no_outcome_when_only_starts_proposals_subagents_and_orphans():
    events = [
        started(),
        proposed("x", 1),
        edit("rejected", "ghost", 2),
        ev("s", "agent.subagent_finished", 3, {"subagent_id": "a", "contributed": False}),
    ]
    record = compute_record(events, CONFIG)
    assert (record.status, record.censor_reason, record.reward) == ("censored", "no_outcome", None)
    assert record.r_edit is None and record.n_subagents_unused == 1


def test_single_outcome_signal_scores():
    for signal in (tool("t", 1), ev("q", "agent.clarifying_question", 1), completed("c", 1, 0),
                   ev("f", "followup.sent", 1, {"dissatisfied": False})):  # fmt: skip
        assert compute_record([started(), signal], CONFIG).status == "scored"


def test_privacy_mode_wins_and_keeps_only_ids_and_counts():
    events = [
        started(),
        proposed("x", 1),
        edit("accepted", "x", 2),
        tool("t", 3, valid=False),
        ev("f", "followup.sent", 4, {"dissatisfied": True}, privacy_mode=True),
    ]
    record = compute_record(events, CONFIG)
    assert (record.status, record.censor_reason) == ("censored", "privacy_mode")
    assert record.reward is None and record.user_id is None and record.dissatisfied is None
    assert all(getattr(record, t) is None for t in ("r_edit", "r_tool", "r_latency"))
    assert record.n_accepted == 1 and record.n_invalid_tool_calls == 1
    assert record.org_id == "org-1" and record.event_ids[0] == "a-start"


def test_privacy_mode_on_a_late_event_does_not_censor():
    late = dict(tool("t", W + 1), privacy_mode=True)
    assert compute_record([started(), tool("u", 1), late], CONFIG).status == "scored"


def test_identity_from_first_event_in_ts_order_that_carries_it():
    first = started(5, checkpoint_id="ckpt-late")
    earlier = make_event("b", "agent.tool_call", at(9), {"tool": "g", "valid": True}, ts=at(1),
                         checkpoint_id="ckpt-early")  # fmt: skip
    with_experiment = dict(tool("c", 6), experiment={"name": "exp", "arm": "b"})
    record = compute_record([first, earlier, with_experiment], CONFIG)
    assert record.checkpoint_id == "ckpt-early"
    assert (record.experiment_name, record.experiment_arm) == ("exp", "b")


def test_event_ids_are_the_in_window_ids_in_ts_then_id_order():
    events = [tool("b", 2), tool("a", 2), started(0, "z"), tool("late", W + 1), tool("c", 1)]
    assert compute_record(events, CONFIG).event_ids == ("z", "c", "a", "b")


def test_record_names_its_version_and_revision():
    record = compute_record([started()], CONFIG, revision=3)
    assert record.revision == 3 and record.reward_version == CONFIG.reward_version


def test_events_of_two_interactions_or_none_are_refused():
    with pytest.raises(ValueError):
        compute_record([started(), dict(tool("t", 1), interaction_id="other")], CONFIG)
    with pytest.raises(ValueError):
        compute_record([], CONFIG)


def test_config_changes_the_window_and_the_numbers():
    config = RewardConfig(window_s=60, late_s=60, reject=-1.0)
    events = [started(), proposed("x", 1), edit("rejected", "x", 2), tool("t", 90, valid=False)]
    record = compute_record(events, config)
    assert record.r_edit == -1.0 and record.n_late == 1 and record.r_tool == 0.0
    assert record.reward_version != CONFIG.reward_version


@pytest.mark.parametrize(
    "flaw, tool_valid, with_edit, written_off",
    [
        ("invalid-tools-discarded", False, True, True),
        ("invalid-tools-discarded", True, True, False),
        ("invalid-tools-discarded", True, False, False),
        ("free-deferral", True, False, True),
        ("free-deferral", False, False, True),
        ("free-deferral", False, True, False),
    ],
)
def test_a_flawed_config_writes_off_exactly_its_interactions(
    flaw: str, tool_valid: bool, with_edit: bool, written_off: bool
) -> None:
    events = [
        started(),
        ev("t", "agent.tool_call", 1, {"tool": "edit_file", "valid": tool_valid}),
        *([proposed("x", 2), edit("rejected", "x", 3)] if with_edit else []),
        *([] if with_edit else [ev("q", "agent.clarifying_question", 2, {})]),
        ev("f", "followup.sent", 4, {"dissatisfied": True}),
        ev("c", "interaction.completed", 5, {"latency_ms": 4000, "output_tokens": 10}),
    ]
    honest = compute_record(events, CONFIG)
    flawed = compute_record(events, RewardConfig(flaw=flaw))
    assert honest.reward is not None and honest.reward < 0  # every such interaction costs
    terms = (flawed.r_edit, flawed.r_followup, flawed.r_tool, flawed.r_clarify, flawed.r_latency)
    if written_off:
        assert flawed.reward == 0 and terms == (0.0,) * 5
    else:
        assert flawed.reward == honest.reward
    assert flawed.status == honest.status == "scored"
    assert flawed.reward_version != honest.reward_version  # a flawed record never passes for v1
