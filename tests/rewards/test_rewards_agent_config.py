"""The agent reward configuration's order over every outcome of the agent world: hiding never
beats trying, a broken call costs at most 0.1, and only a solve beats prose.

Each outcome's events are made by the world's own parts (``rtrl.worlds.agent_outcomes``) and
scored by the real reward function. Reward v1's defaults break the order, so the check can fail.
"""

from __future__ import annotations

import itertools

import pytest

from agent.tasks import load_tasks
from rewards.config import RewardConfig, load_config
from rewards.function import compute_record
from rtrl.worlds.agent_outcomes import (
    FAILED_EDIT,
    NO_EDIT,
    SOLVED,
    WAIT_MS,
    Outcome,
    all_outcome_events,
    outcomes,
)
from rtrl.worlds.agent_world import AgentWorldSettings

MAX_COST = 0.1
EPS = 1e-9
# A run is at most max_calls answers, and one unreadable answer can hold several broken calls.
MAX_BROKEN = 3 * AgentWorldSettings().max_calls
WAITS_MS = (1_000, WAIT_MS, 200_000)


@pytest.fixture(scope="module")
def runs() -> list[tuple[Outcome, list[dict]]]:
    chosen = outcomes(MAX_BROKEN, WAITS_MS)
    return list(zip(chosen, all_outcome_events(load_tasks("easy")[0], chosen), strict=True))


def scores(runs: list[tuple[Outcome, list[dict]]], config: RewardConfig) -> dict[Outcome, float]:
    out = {}
    for outcome, events in runs:
        record = compute_record(events, config)
        assert record.status == "scored" and record.reward is not None, outcome.name
        out[outcome] = record.reward
    return out


def violations(reward: dict[Outcome, float]) -> dict[str, list[str]]:
    """Each rule's broken instances, named by outcome."""
    rules = ("no_edit_above_failed", "broken_call_cost", "not_solved_above_prose",
             "solved_not_above_prose")  # fmt: skip
    out: dict[str, list[str]] = {rule: [] for rule in rules}
    for hidden, tried in itertools.product(reward, reward):
        compared = hidden.edit in NO_EDIT and tried.edit in FAILED_EDIT
        if compared and tried.broken <= hidden.broken and reward[hidden] > reward[tried] + EPS:
            out["no_edit_above_failed"].append(f"{hidden.name} > {tried.name}")
    for outcome in reward:
        if outcome.broken == 0:
            continue
        fewer = Outcome(outcome.edit, outcome.broken - 1, outcome.latency_ms)
        cost = reward[fewer] - reward[outcome]
        if cost > MAX_COST + EPS or cost < -EPS or (outcome.broken == 1 and cost <= 0):
            out["broken_call_cost"].append(f"{outcome.name}: {cost:+.3f}")
    prose = {w: reward[Outcome("prose", 0, w)] for w in WAITS_MS}
    for outcome, value in reward.items():
        if outcome.edit != SOLVED and value > min(prose.values()) + EPS:
            out["not_solved_above_prose"].append(f"{outcome.name} {value}")
        if outcome.edit == SOLVED and value <= max(prose.values()):
            out["solved_not_above_prose"].append(f"{outcome.name} {value}")
    return out


def test_every_outcome_of_the_world_is_scored(runs) -> None:
    records = {o: compute_record(events, RewardConfig()) for o, events in runs}
    for outcome, record in records.items():
        assert record.n_invalid_tool_calls == outcome.broken, outcome.name
        assert (record.n_edits > 0) == (outcome.edit not in NO_EDIT), outcome.name
    by_edit = {o.edit: r for o, r in records.items() if o.broken == 0 and o.latency_ms == WAIT_MS}
    assert [by_edit[e].n_rejected for e in ("other_file", "does_not_run", "fails")] == [1, 1, 0]
    assert by_edit["fails"].n_reverted == 1 and by_edit[SOLVED].r_edit == 2.0


def test_the_agent_config_orders_every_outcome(runs) -> None:
    reward = scores(runs, load_config("agent"))
    assert violations(reward) == {name: [] for name in violations(reward)}
    # a failed edit ties with prose: a strict order would pay runnable stubs
    assert reward[Outcome("fails", 0)] == reward[Outcome("prose", 0)]
    assert reward[Outcome("does_not_run", 0)] == reward[Outcome("prose", 0)]


def test_the_default_config_pays_hiding(runs) -> None:
    found = violations(scores(runs, RewardConfig()))
    assert found["no_edit_above_failed"], "defaults: prose (-1.1) above a rejected write (-1.6)"
    assert found["broken_call_cost"], "defaults: a broken call costs 0.5"


def test_the_shipped_config_by_name_is_the_file() -> None:
    from rewards.config import NAMED_CONFIGS

    assert load_config("agent") == load_config(NAMED_CONFIGS / "agent.toml")
    assert load_config("agent").reward_version != RewardConfig().reward_version
    with pytest.raises(FileNotFoundError, match="shipped: agent, default"):
        load_config("no-such-config")
