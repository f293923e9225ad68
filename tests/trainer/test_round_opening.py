"""A round's gate with the tool-opening check on: the parent's weights are kept before the
update, and an update that pushed the call opening down is an alarm the gate blocks on; the
same weights are none."""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from checkpoints.store import CheckpointRegistry
from checkpoints.weights import load_policy, register_base
from infra.topics import TopicNames
from models.examples import Example
from release.gate import GateConfig
from tests.support.agent_runs import agent_run
from tests.support.tool_opening import CONFIG, TASKS, push_down_opening, taught_to_call
from trainer.learner import LearnerConfig
from trainer.round_evals import RoundEvals
from trainer.round_examples import RoundExamples
from trainer.round_gate import judge
from trainer.round_options import RoundOptions


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


def test_a_candidate_the_cheap_checks_reject_is_still_named_for_avoiding_its_tools(
    tmp_path, policy
) -> None:  # noqa: ANN001
    """The opening check is scored, not sampled, so the gate runs it beside the cheap checks:
    a candidate that learned to stop calling and is also short of evidence is rejected for
    both. Broken once on purpose: with the check run only after the cheap checks passed (as
    it was), the rejection named the missing evidence alone and this failed."""
    registry = CheckpointRegistry(tmp_path / "registry")  # the fixture's, with the base
    parent = registry.get("t-0000")
    gate = GateConfig(eval_prompts=0, tool_opening=True, min_examples=1000, resamples=200)
    evals = RoundEvals(policy, gate, None, None, main_process=True, opening=CONFIG,
                       opening_tasks=TASKS)  # fmt: skip
    runs = [agent_run(policy, parent, f"run-{k}", seed=k)[0] for k in range(4)]
    held = [Example(c, 0.5, user_id=f"u{k}") for k, run in enumerate(runs) for c in run]
    push_down_opening(policy)  # the round's update
    options = RoundOptions(registry=registry.root, warehouse=tmp_path, bootstrap="unused:9092",
                           topics=TopicNames(), learner=LearnerConfig(), gate=gate)  # fmt: skip
    data = RoundExamples(held, [], held, Counter(), {})
    outcome = judge(registry, parent, "t-0001", policy, data, [], options, evals)
    reasons = outcome.decision.reasons
    assert not outcome.decision.passed
    assert any("fewer than the 1000 needed" in r for r in reasons)
    assert any("blocked: tool avoidance" in r for r in reasons), reasons
    assert outcome.opening is not None and outcome.opening_alarms == [outcome.opening.message]
    kept = outcome.opening.as_record()  # the record's numbers, as bench/ reads them
    assert kept["blocked"] and kept["candidate_mean"] < kept["parent_mean"]
    assert len(kept["parent"]) == len(kept["candidate"]) == len(kept["tasks"]) == len(TASKS)
