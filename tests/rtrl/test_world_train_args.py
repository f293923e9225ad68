"""Each world's `rtrl train` options are ones `rtrl train` takes, and give a valid learner: a
renamed learner option must fail here, not an hour into a world's run."""

from __future__ import annotations

import argparse

import pytest

from rtrl.worlds.agent_world import AgentWorldSettings
from rtrl.worlds.code_world import CodeWorldSettings
from trainer.cli import register
from trainer.learner_cli import learner_from


@pytest.mark.parametrize("settings", [CodeWorldSettings(), AgentWorldSettings()],
                         ids=["code", "agent"])  # fmt: skip
def test_a_worlds_train_options_parse_into_a_learner(settings) -> None:  # noqa: ANN001
    parser = argparse.ArgumentParser(exit_on_error=False)
    register(parser.add_subparsers())
    args, unknown = parser.parse_known_args(["train", *settings.train_args()])
    assert unknown == []
    learner = learner_from(args)
    assert 2 <= learner.minibatches <= 4
    # an agent world's candidate is checked for tool avoidance before it serves
    assert args.tool_opening == isinstance(settings, AgentWorldSettings)


@pytest.mark.parametrize("name", ["tool-avoidance", "tool-avoidance-control"])
def test_the_avoidance_scenarios_train_with_the_worlds_own_learner(name: str) -> None:
    """Only the reward differs from the agent world, so what the tool-opening check sees is the
    reward's doing: a stronger learner collapsed the opening under either reward."""
    from rtrl.worlds.scenarios import SCENARIOS

    parser = argparse.ArgumentParser(exit_on_error=False)
    register(parser.add_subparsers())
    world = AgentWorldSettings().train_args()
    args = parser.parse_args(["train", *world, *SCENARIOS[name].train_args()])
    assert learner_from(args) == learner_from(parser.parse_args(["train", *world]))
    assert args.tool_opening and args.lora_r == 16  # the world's LoRA and check stay


def test_the_agent_worlds_gate_can_judge_a_round() -> None:
    """A round's held-out runs must be able to meet the gate's minimum, or the trainer waits for
    evidence the round never brings: at the default 50, a 48-user round's 20 held-out runs
    could never pass, however good the candidate. `rtrl run` fits the minimums to its round."""
    from rtrl.run.gate_floor import gate_minimums

    parser = argparse.ArgumentParser(exit_on_error=False)
    register(parser.add_subparsers())
    world = AgentWorldSettings()
    args = parser.parse_args(["train", *gate_minimums(world.round_users, world.train_args()),
                              *world.train_args()])  # fmt: skip
    held_out_runs = world.round_users * world.held_out
    assert args.min_examples <= 0.7 * held_out_runs
    assert args.min_users <= 0.7 * held_out_runs  # each held-out run is its own user
