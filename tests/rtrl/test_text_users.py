"""Simulated users who read real text: an edit that passes the hidden tests is accepted, one
that fails is rejected, a missing edit brings a dissatisfied follow-up, and every event they
send is a valid event whose reward says what they did."""

from __future__ import annotations

import random

from agent.harness import Harness
from agent.sandbox import grade
from agent.tasks import get_task
from agent.telemetry import envelope
from rewards.config import RewardConfig
from rewards.function import compute_record
from rtrl.worlds.text_users import HiddenTaste, plugin_events, react

HARNESS = Harness()
STRICT = HiddenTaste(noise=0.0, revert=0.0, impatience=1.0, max_lines=40)
TASK = get_task("clamp")


def answer(code: str) -> str:
    return f"Sure:\n```python\n{code}\n```\n"


def record_of(text: str, taste: HiddenTaste = STRICT, seed: int = 0):  # noqa: ANN201
    turn = HARNESS.read(text)
    passed = bool(turn.code()) and grade(turn.code(), TASK).passed
    reaction = react(turn, passed, taste, random.Random(seed))
    events = envelope(plugin_events(turn, reaction, latency_ms=900, output_tokens=40),
                      interaction_id="i1", session_id="s1", user_id="u1", org_id="acme",
                      checkpoint_id="c1", ts="2026-12-01T10:00:00Z")  # fmt: skip
    for n, event in enumerate(events):  # the collector stamps each event when it arrives
        event["received_at"] = f"2026-12-01T10:00:{n:02d}.000000Z"
    return passed, reaction, compute_record(events, RewardConfig())


def test_a_passing_edit_is_accepted_and_kept():
    passed, reaction, record = record_of(answer(TASK.reference))
    assert passed and reaction.accepted and not reaction.dissatisfied
    assert (record.n_edits, record.n_accepted, record.n_rejected) == (1, 1, 0)
    assert record.reward is not None and record.reward > 0


def test_a_failing_edit_is_rejected_and_the_user_is_dissatisfied():
    passed, reaction, record = record_of(answer("def clamp(value, lo, hi):\n    return value"))
    assert not passed and reaction.accepted is False and reaction.dissatisfied
    assert (record.n_edits, record.n_rejected, record.dissatisfied) == (1, 1, True)
    assert record.reward is not None and record.reward < 0


def test_a_question_instead_of_an_edit_brings_a_dissatisfied_followup():
    passed, reaction, record = record_of("Should values outside the range raise?")
    assert reaction.accepted is None and reaction.dissatisfied
    assert (record.n_edits, record.n_clarifying, record.dissatisfied) == (0, 1, True)


def test_noise_flips_some_verdicts_and_reverts_follow_acceptances():
    turn = HARNESS.read(answer(TASK.reference))
    taste = HiddenTaste(noise=0.3, revert=0.5, impatience=0.5, max_lines=40)
    rng = random.Random(1)
    reactions = [react(turn, True, taste, rng) for _ in range(2000)]
    accepted = sum(bool(r.accepted) for r in reactions) / 2000
    reverted = sum(r.reverted for r in reactions) / max(1, sum(bool(r.accepted) for r in reactions))
    assert 0.65 < accepted < 0.75 and 0.45 < reverted < 0.55
