"""Agent runs in training: every call of a run is trained on with the run's advantage (no
per-turn credit), the environment's tokens (tool results) carry no loss, and the gate weighs
and counts whole trajectories."""

from __future__ import annotations

import polars as pl
import pytest
import torch

from checkpoints.weights import load_policy
from models.examples import Example, read_examples
from release.offpolicy import evidence_rows
from tests.support.agent_runs import agent_run
from tests.support.checkpoints import register_variant
from trainer.advantages import run_advantages
from trainer.learner import LearnerConfig, update
from warehouse.manifest import BATCH_DATA_SCHEMA


def test_tool_result_tokens_get_no_gradient(registry):
    """The learner's gradient reaches the positions that predict the model's own tokens only:
    the final hidden state at a position that predicts a tool-result token (or the model's
    earlier answer, inside the second call's prompt) gets exactly zero gradient. Broken once on
    purpose: scoring the second call's whole sequence after the first prompt as its completion
    (tool result included) gave those positions gradients up to 2e-4, and this failed."""
    info = registry.get("t-0000")
    policy = load_policy(registry, info)
    calls, result_span = agent_run(policy, info, "run-1", seed=3)
    same, _ = agent_run(policy, info, "run-2", seed=3)  # its task's other run, the same tokens
    examples = [Example(c, 1.0) for c in calls] + [Example(c, 0.0) for c in same]
    grads: list[torch.Tensor] = []

    def keep_grad(_module, _inputs, output):
        if output.requires_grad:
            output.register_hook(lambda g: grads.append(g.detach().clone()))

    hook = policy.model.model.norm.register_forward_hook(keep_grad)
    try:
        config = LearnerConfig(lr=1e-3, epochs=1, minibatches=2, micro_batch=1, target_kl=0.0)
        stats = update(policy, examples, config).stats
    finally:
        hook.remove()
    assert stats.has_signal and stats.grad_steps == 2  # one run a minibatch
    second = calls[1]
    width = len(second.prompt_ids) + len(second.completion_ids)
    found = [g[0] for g in grads if g.shape[1] == width]
    assert len(found) == 2  # the second call of each run
    for grad in found:
        per_position = grad.abs().sum(dim=-1)  # position p predicts token p + 1
        predicts_result = [p - 1 for p in result_span]
        predicts_earlier_answer = range(len(calls[0].prompt_ids) - 1, result_span.start - 1)
        predicts_own = range(len(second.prompt_ids) - 1, width - 1)
        assert per_position[predicts_result].max() == 0.0
        assert per_position[list(predicts_earlier_answer)].max() == 0.0
        assert (per_position[list(predicts_own)] > 0).all()


def test_a_batch_trains_every_call_of_a_run_once_with_the_runs_advantage(registry, tmp_path):
    """The batch row of an agent run holds all its rollouts (one published twice); the trainer
    reads each call once with the run's reward and both calls get the run's one advantage
    (per-turn credit, the reward less the broken calls of earlier turns, is read but no longer
    trained on: it gave the answer after a broken call +5.0 in a group of equal runs)."""
    info = registry.get("t-0000")
    policy = load_policy(registry, info)
    calls, _ = agent_run(policy, info, "run-1", seed=4, broken=1)
    raws = [c.to_json().decode() for c in (calls[0], calls[1], calls[1])]
    base = {name: None for name in BATCH_DATA_SCHEMA.names()}
    row = {**base, "batch_id": "b", "interaction_id": "run-1", "checkpoint_id": "t-0000",
           "status": "scored", "reward": -1.5, "r_tool": -1.0, "n_invalid_tool_calls": 2,
           "rollout_json": raws[-1], "trajectory_json": raws}  # fmt: skip
    path = tmp_path / "b.parquet"
    pl.DataFrame([row], schema=BATCH_DATA_SCHEMA).write_parquet(path)
    read = read_examples(path)
    assert [e.rollout.turn.call_id for e in read.examples] == ["run-1-c1", "run-1-c2"]
    assert [e.reward for e in read.examples] == [-1.5, -1.5]
    # one of the two invalid calls was the gateway's to see, in turn 1: -0.5 of r_tool is its
    assert [e.credited for e in read.examples] == [-1.5, -1.0]
    assert run_advantages(read.examples, 1.0) == [0.0, 0.0]  # alone with its task: no signal
    other = [Example(c, 0.5) for c in agent_run(policy, info, "run-2", seed=4)[0]]  # same task
    assert run_advantages([*read.examples, *other], 1.0) == [-2.0, -2.0, 2.0, 2.0]


def test_the_gate_weighs_a_trajectory_by_the_product_of_its_calls(registry):
    """One evidence row per run: its log-probabilities are both calls' in order (so its
    sequence weight is the product of the calls' weights) and the ESS counts runs."""
    info = registry.get("t-0000")
    policy = load_policy(registry, info)
    runs = [agent_run(policy, info, f"run-{k}", seed=k)[0] for k in range(3)]
    examples = [Example(c, 0.5, user_id=f"u{k}") for k, run in enumerate(runs) for c in run]
    candidate = load_policy(registry, register_variant(registry, "t-0001", "t-0000", seed=9))
    rows = evidence_rows(candidate, examples)
    assert [r.interaction_id for r in rows] == ["run-0", "run-1", "run-2"]
    for row, run in zip(rows, runs, strict=True):
        assert row.behaviour_logprobs == tuple(v for c in run for v in c.logprobs)
        assert len(row.candidate_logprobs) == sum(len(c.completion_ids) for c in run)
    single = evidence_rows(candidate, [examples[0]])[0]  # the first call alone
    alone = rows[0].candidate_logprobs[: len(runs[0][0].logprobs)]
    assert single.candidate_logprobs == pytest.approx(alone, abs=1e-4)  # padded otherwise
