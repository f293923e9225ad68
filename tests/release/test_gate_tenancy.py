"""A user id that two organisations use is two users: two resampling units in the gate's
evidence, held out or trained on each by its own draw, and two agent runs where the
interaction id is shared too."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace as NS
from typing import Any, cast

from models.examples import Example, trajectories
from release.canary_evidence import Row, users_at
from release.evidence import EvidenceRow, estimate_rows, read_evidence, write_evidence
from trainer.round_examples import held_out, split, unit_of


def _row(org: str | None, user: str, interaction: str, reward: float) -> EvidenceRow:
    return EvidenceRow(user, interaction, reward, (-1.0,), (-1.0,), org_id=org)


def test_one_user_id_in_two_organisations_is_two_units(tmp_path) -> None:
    rows = [_row("org-a", "u1", "i1", 1.0), _row("org-b", "u1", "i1", 0.0)]
    assert rows[0].unit != rows[1].unit
    again = read_evidence(write_evidence(tmp_path / "evidence.jsonl", rows))
    assert [r.org_id for r in again] == ["org-a", "org-b"]
    figures = dict(level=0.95, resamples=200, seed=0, weight_cap=10.0, reward_min=0.0,
                   reward_max=1.0)  # fmt: skip
    assert estimate_rows(again, **figures).users == 2  # type: ignore[arg-type]
    # evidence written before organisations were recorded keeps its units as they were
    legacy = [_row(None, "u1", "i1", 1.0), _row(None, "u1", "i2", 0.0)]
    assert legacy[0].unit == "user:u1" and estimate_rows(legacy, **figures).users == 1  # type: ignore[arg-type]


def _example(org: str, user: str, interaction: str = "i", turn: Any = None) -> Example:
    rollout = NS(interaction_id=interaction, turn=turn)
    return cast(Example, NS(rollout=rollout, user_id=user, session_id=None, org_id=org))


def test_the_held_out_draw_is_per_organisation() -> None:
    fraction = 0.5
    # a user id whose two organisations' draws differ (found by the hash, not chosen by hand)
    user = next(
        f"u{k}"
        for k in range(1000)
        if held_out(unit_of(_example("org-a", f"u{k}")), fraction)
        != held_out(unit_of(_example("org-b", f"u{k}")), fraction)
    )
    examples = [_example("org-a", user), _example("org-b", user)]
    train, held = split(examples, fraction)
    assert len(train) == 1 and len(held) == 1 and train[0].org_id != held[0].org_id


def test_two_organisations_agent_runs_with_one_interaction_id_are_two_runs() -> None:
    runs = [_example(org, "u1", "i1", turn=object()) for org in ("org-a", "org-a", "org-b")]
    assert trajectories(runs) == [[0, 1], [2]]


def test_the_canary_counts_one_user_id_of_two_organisations_as_two_users() -> None:
    t0 = datetime(2026, 12, 1, tzinfo=UTC)
    rows = [
        Row("i1", 0, "u1", "canary", t0, t0 + timedelta(hours=1), reward, org_id=org)
        for org, reward in (("org-a", 1.0), ("org-b", -1.0))
    ]
    seen = users_at(rows, t0 + timedelta(hours=2), window_hours=0)
    assert seen.assigned["canary"] == 2 and seen.crossed == 0
    assert sorted(u.reward for u in seen.users["canary"]) == [-1.0, 1.0]
