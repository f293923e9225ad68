"""Candidate evals before serving: a candidate trained to call tools badly is blocked by its own
generations before it serves one interaction; one trained to call them well is not (a move in
the good direction is never an alarm)."""

from __future__ import annotations

import pytest

from checkpoints.weights import load_policy
from models.examples import Example
from release.gate import GateConfig
from rtrl.worlds.token_reader import SIMULATED, SimulatedBehaviour
from tests.support.checkpoints import PARAMS, write_batch
from tests.support.rounds import round_options
from trainer.learner import LearnerConfig
from trainer.train import train_round

pytestmark = pytest.mark.slow


def _round(registry, tmp_path, reward_invalid: float):
    root = registry.get("t-0000")
    policy = load_policy(registry, root)
    reader = SimulatedBehaviour(policy.vocab_size)
    from tests.support.checkpoints import serve

    served = serve(policy, root, 400, seed=5, params=PARAMS)
    examples = [
        Example(
            e.rollout,
            reward_invalid if reader.invalid(e.rollout.completion_ids) else -reward_invalid,
        )
        for e in served
    ]
    batch = write_batch(tmp_path / "b.parquet", examples)
    return train_round(
        registry,
        "t-0000",
        [("b", [batch])],
        "t-0001",
        round_options(
            registry,
            LearnerConfig(lr=1e-2, epochs=4, minibatches=2, micro_batch=32),
            GateConfig(
                min_gain=-100,
                max_kl=100,
                min_ess_fraction=0,
                eval_prompts=64,
                eval_samples=6,
                eval_reader=SIMULATED,  # the users of these rollouts act on tokens
            ),
        ),
        alarms=[],
    )


def _invalid_test(result):
    return next(
        t
        for t in result.candidate.evals["candidate_evals"]
        if t["metric"] == "invalid_tool_call_rate"
    )


def test_a_candidate_that_calls_tools_badly_is_blocked_before_it_serves(registry, tmp_path):
    result = _round(registry, tmp_path, reward_invalid=1.0)
    test = _invalid_test(result)
    assert test["candidate"] >= 2 * test["parent"] and test["alarm"]
    assert result.candidate.status == "rejected"
    assert any(
        r.startswith("candidate eval: invalid_tool_call_rate") for r in result.candidate.reasons
    )


def test_a_candidate_that_calls_tools_well_is_not_blocked(registry, tmp_path):
    result = _round(registry, tmp_path, reward_invalid=-1.0)
    test = _invalid_test(result)
    assert test["candidate"] <= test["parent"] / 2 and not test["alarm"]
    assert result.candidate.status == "promoted", result.candidate.reasons
