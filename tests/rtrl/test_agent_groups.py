"""The agent world's rounds by design: every task the same number of runs, the same number of
each held out by the learner's own split; the closing A/B sized by the power rule; the agent
reward configuration by default."""

from __future__ import annotations

import math
from collections import Counter
from types import SimpleNamespace

import pytest

from rtrl.run.loop import run_reward
from rtrl.run.settings import RunSettings
from rtrl.worlds.agent_groups import balanced_asks, held_per_task
from rtrl.worlds.agent_world import AgentWorldSettings, round_asks
from stats.group_sequential import max_size_ratio, obrien_fleming
from stats.power import runs_per_arm
from trainer.round_examples import held_out, unit_of


@pytest.mark.parametrize(("runs", "fraction"), [(8, 0.5), (6, 0.3), (4, 0.25), (2, 0.5)])
def test_every_task_gets_k_runs_and_the_same_share_held_out(runs: int, fraction: float) -> None:
    settings = AgentWorldSettings(runs_per_task=runs, held_out=fraction)
    asks = balanced_asks(settings.task_list(), runs, fraction, seed=3, org_id="acme")
    assert Counter(t.function for _, t in asks) == {name: runs for name in settings.tasks}
    assert len({u for u, _ in asks}) == len(asks)  # one run a user
    held = Counter(t.function for u, t in asks if held_out(learners_unit(u, "acme"), fraction))
    assert held == {name: held_per_task(runs, fraction) for name in settings.tasks}
    assert 0 < held_per_task(runs, fraction) < runs


def learners_unit(user_id: str, org_id: str) -> str:
    """The unit the learner holds out, as it keys a run of ``user_id`` in ``org_id``."""
    run = SimpleNamespace(user_id=user_id, session_id=f"s_{user_id}", org_id=org_id,
                          rollout=SimpleNamespace(interaction_id="i1"))  # fmt: skip
    return unit_of(run)  # type: ignore[arg-type]


def test_the_groups_are_balanced_as_the_learner_keys_users_in_their_organisation() -> None:
    """The hash is the learner's, of the user within the run's organisation: balanced for
    acme's key, the same ids need not be for another organisation's."""
    settings = AgentWorldSettings()
    asks = round_asks(settings.round_users, seed=6001, org_id="acme", settings=settings)
    held = Counter(t.function for u, t in asks if held_out(learners_unit(u, "acme"), 0.5))
    assert held == {name: settings.runs_per_task // 2 for name in settings.tasks}
    elsewhere = Counter(t.function for u, t in asks if held_out(learners_unit(u, "globex"), 0.5))
    assert elsewhere != held


def test_a_round_rounds_its_users_down_to_whole_groups() -> None:
    settings = AgentWorldSettings()
    asks = round_asks(len(settings.tasks) * 6 - 1, seed=11, org_id="acme", settings=settings)
    assert set(Counter(t.function for _, t in asks).values()) == {5}
    assert round_asks(8, 11, "acme", settings) == round_asks(8, 11, "acme", settings)


def test_the_agent_plan_sizes_its_closing_ab_by_the_power_rule_and_says_so() -> None:
    plan = RunSettings(world="agent").plan()
    a = plan.agent
    fixed = runs_per_arm(a.ab_base_rate, a.ab_base_rate + a.ab_effect, 0.05, 0.95)
    looks = obrien_fleming(a.ab_looks)
    assert plan.ab_users == math.ceil(fixed * max_size_ratio(looks, power=0.95)) > fixed
    assert plan.round_users == len(a.tasks) * a.runs_per_task
    design = plan.agent_design()
    assert design is not None and f"closing A/B {plan.ab_users} users" in design
    assert f"looked at {a.ab_looks} time(s) with |z| bounds {looks[0]:.3f}" in design
    assert AgentWorldSettings(ab_looks=1).ab_users == fixed
    assert RunSettings(world="agent", ab_users=10).plan().ab_users == 10
    assert RunSettings(world="code").plan().agent_design() is None


def test_the_agent_world_scores_by_the_agent_config_unless_told_otherwise(tmp_path) -> None:
    assert RunSettings(world="agent").plan().reward_config == "agent"
    assert RunSettings(world="code").plan().reward_config is None
    given = tmp_path / "mine.toml"
    given.write_text("[reward]\ninvalid_tool_call = -0.05\n")
    plan = RunSettings(world="agent", reward_config=str(given)).plan()
    reward = run_reward(plan.reward_config, 20, 10, 2, "none")
    assert (reward.invalid_tool_call, reward.window_s, reward.late_s) == (-0.05, 20, 10)
    assert run_reward("agent", 20, 10, 2, "free-deferral").flaw == "free-deferral"
