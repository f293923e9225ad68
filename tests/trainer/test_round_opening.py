"""A round's gate with the tool-opening check on: the parent's weights are kept before the
update, and an update that pushed the call opening down is an alarm the gate blocks on; the
same weights are none."""

from __future__ import annotations

import pytest
import torch

from checkpoints.store import CheckpointRegistry
from checkpoints.weights import load_policy, register_base
from release.gate import GateConfig
from tests.support.tool_opening import CONFIG, TASKS, push_down_opening, taught_to_call
from trainer.round_evals import RoundEvals


@pytest.fixture
def policy(tmp_path, tiny_model):  # noqa: ANN001, ANN201
    registry = CheckpointRegistry(tmp_path / "registry")
    register_base(registry, "t-0000", tiny_model)
    torch.manual_seed(0)
    taught = taught_to_call(load_policy(registry, registry.get("t-0000")))
    taught.model.get_output_embeddings().weight.requires_grad_(True)  # what the round trains
    return taught


def evals_of(policy, tool_opening: bool) -> RoundEvals:  # noqa: ANN001
    gate = GateConfig(eval_prompts=0, tool_opening=tool_opening)
    return RoundEvals(policy, gate, None, None, main_process=True)


def test_an_update_that_stops_opening_with_a_call_is_an_alarm(policy) -> None:  # noqa: ANN001
    evals = evals_of(policy, tool_opening=True)  # the parent's weights kept now
    push_down_opening(policy)  # the round's update
    alarms = evals.opening_alarms(policy, CONFIG, TASKS)
    assert len(alarms) == 1 and "blocked: tool avoidance" in alarms[0]


def test_weights_that_did_not_move_and_a_check_turned_off_give_none(policy) -> None:  # noqa: ANN001
    assert evals_of(policy, tool_opening=True).opening_alarms(policy, CONFIG, TASKS) == []
    off = evals_of(policy, tool_opening=False)
    push_down_opening(policy)
    assert off.opening_alarms(policy, CONFIG, TASKS) == []
