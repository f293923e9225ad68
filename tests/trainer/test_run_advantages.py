"""One advantage per run (a leave-one-out baseline within its task's group, divided by a
constant), one epoch over every run in minibatches of whole runs under the KL rule, and a loss
normalised by one constant per round."""

from __future__ import annotations

import polars as pl
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from checkpoints.weights import load_policy
from models.examples import Example, read_examples
from tests.support.agent_runs import agent_run
from trainer.advantages import leave_one_out, run_advantages
from trainer.epochs import loss_normaliser, run_minibatches
from trainer.learner import LearnerConfig, _Trainer, update
from warehouse.manifest import BATCH_DATA_SCHEMA

TASK = "Fix the failing test in utils.py."


def _batch_of_runs(policy, info, tmp_path, rewards, broken=0, task=TASK) -> list[Example]:
    """One run per reward, all of ``task``, read back from a batch file as the trainer reads
    them (each run's first call made ``broken`` unreadable calls, charged -0.5 each)."""
    base = {name: None for name in BATCH_DATA_SCHEMA.names()}
    rows = []
    for k, reward in enumerate(rewards):
        calls, _ = agent_run(policy, info, f"run-{k}", seed=k, broken=broken, task=task)
        raws = [c.to_json().decode() for c in calls]
        rows.append({**base, "batch_id": "b", "interaction_id": f"run-{k}",
                     "checkpoint_id": info.checkpoint_id, "status": "scored", "reward": reward,
                     "r_tool": -0.5 * broken, "n_invalid_tool_calls": broken,
                     "rollout_json": raws[-1], "trajectory_json": raws})  # fmt: skip
    path = tmp_path / "b.parquet"
    pl.DataFrame(rows, schema=BATCH_DATA_SCHEMA).write_parquet(path)
    return read_examples(path).examples


def test_four_equal_runs_with_a_broken_call_each_give_no_signal(registry, tmp_path):
    """The +5.0 case: four runs of one task, each with one broken call, all -1.6. Per-turn
    credit gave the prose answer after each broken call (-1.1 credited) (-1.1 + 1.6) / 0.1 =
    +5.0 and trained on it; one advantage per run gives all four runs 0, and nothing is learnt.
    Failed on the per-turn learner (has_signal True, weights moved)."""
    info = registry.get("t-0000")
    policy = load_policy(registry, info)
    examples = _batch_of_runs(policy, info, tmp_path, [-1.6] * 4, broken=1)
    assert [e.credited for e in examples] == [-1.6, -1.1] * 4  # the case's premise
    before = [p.detach().clone() for p in policy.model.parameters()]
    result = update(policy, examples, LearnerConfig(lr=1e-2, epochs=1, micro_batch=2))
    assert not result.stats.has_signal and result.stats.grad_steps == 0
    assert all(torch.equal(a, b) for a, b in zip(before, policy.model.parameters(), strict=True))


def test_every_call_of_a_run_gets_the_runs_advantage(registry, tmp_path):
    info = registry.get("t-0000")
    policy = load_policy(registry, info)
    examples = _batch_of_runs(policy, info, tmp_path, [1.9, -1.6, -1.1, -1.6], broken=1)
    # run 0 solved among three failures: (1.9 - mean(-1.6, -1.1, -1.6)) / 1 on both its calls
    expected = [3.333333, -1.333333, -0.666667, -1.333333]  # e.g. 1.9 - mean(-1.6, -1.1, -1.6)
    assert run_advantages(examples, 1.0) == pytest.approx(
        [a for a in expected for _ in range(2)], abs=1e-6
    )


def test_a_solved_run_among_failures_is_positive_and_equal_rewards_give_zeros():
    assert leave_one_out([1.9, -1.1, -1.1, -1.1], 1.0) == pytest.approx([3.0, -1.0, -1.0, -1.0])
    assert leave_one_out([-1.1, -1.1, 1.9, -1.1], 2.0)[2] == pytest.approx(1.5)
    assert leave_one_out([0.3] * 5, 1.0) == [0.0] * 5
    assert leave_one_out([0.3, 0.3 + 1e-7], 1.0) == pytest.approx([-1e-7, 1e-7], abs=1e-12)


def test_a_run_alone_with_its_task_gets_no_signal():
    """A single answer is a run of one call; the task of one run is alone in its group."""
    from types import SimpleNamespace as NS

    def answer(prompt, reward):
        return NS(rollout=NS(interaction_id=str(prompt), turn=None, prompt_ids=prompt),
                  scored=reward)  # fmt: skip

    examples = [answer((1,), 1.0), answer((1,), 0.0), answer((2,), 5.0), answer((3,), -5.0)]
    assert run_advantages(examples, 1.0) == [1.0, -1.0, 0.0, 0.0]
    assert leave_one_out([2.0], 1.0) == [0.0] and leave_one_out([], 1.0) == []


@settings(max_examples=200, deadline=None)
@given(rewards=st.lists(st.floats(-5, 5), min_size=2, max_size=16),
       index=st.integers(0, 15), delta=st.floats(-3, 3),
       scale=st.sampled_from([0.5, 1.0, 3.0]))  # fmt: skip
def test_a_runs_own_reward_never_enters_its_scale(rewards, index, delta, scale):
    """A run's advantage moves with its own reward at the slope 1 / scale, whatever the
    others: no spread that holds its own reward divides it (a spread floored at 0.1 gave a tie
    broken by 1e-7 the same +-1 as a real difference, and +5.0 above)."""
    i, n = index % len(rewards), len(rewards)
    moved = [r + delta if k == i else r for k, r in enumerate(rewards)]
    before, after = leave_one_out(rewards, scale), leave_one_out(moved, scale)
    assert after[i] - before[i] == pytest.approx(delta / scale, abs=1e-9)
    for k in range(n):
        if k != i:
            assert after[k] - before[k] == pytest.approx(-delta / ((n - 1) * scale), abs=1e-9)
    spread = max(rewards) - min(rewards)
    assert max(map(abs, before)) <= spread / scale + 1e-9


@settings(max_examples=200, deadline=None)
@given(n_runs=st.integers(1, 60), parts=st.integers(2, 4), seed=st.integers(0, 9),
       epoch=st.integers(0, 3))  # fmt: skip
def test_an_epoch_deals_every_run_to_exactly_one_minibatch(n_runs, parts, seed, epoch):
    dealt = run_minibatches(n_runs, parts, seed, epoch)
    assert len(dealt) == min(parts, n_runs)
    assert sorted(k for part in dealt for k in part) == list(range(n_runs))
    assert max(map(len, dealt)) - min(map(len, dealt)) <= 1


def test_minibatches_hold_whole_runs_and_every_run_is_trained_once_an_epoch(registry):
    """Which calls each optimizer step's forward passes saw, on the tiny model: three steps an
    epoch, each holding both calls of the runs it holds, every call once an epoch."""
    info = registry.get("t-0000")
    policy = load_policy(registry, info)
    rewards = [1.0, 0.0, -0.5, 1.0, 0.5, -1.0]
    runs = [agent_run(policy, info, f"run-{k}", seed=k, task=f"task {k % 2}")[0]
            for k in range(6)]  # fmt: skip
    examples = [Example(c, rewards[k]) for k, run in enumerate(runs) for c in run]
    full = {tuple(e.rollout.prompt_ids) + tuple(e.rollout.completion_ids): e for e in examples}
    seen: list[str] = []
    steps: list[list[str]] = []

    def record(_module, args, kwargs):
        if torch.is_grad_enabled():  # training forwards only, not the scoring passes
            ids = args[0]  # TokenScorer.forward(input_ids, ...): one call a micro-batch
            (call,) = [e for seq, e in full.items() if seq[: ids.shape[1]] == tuple(ids[0])
                       and len(seq) - ids.shape[1] <= 1]  # fmt: skip
            seen.append(call.rollout.turn.call_id)

    hook = policy.scorer.register_forward_pre_hook(record, with_kwargs=True)
    config = LearnerConfig(lr=1e-4, epochs=2, minibatches=3, micro_batch=1)
    try:
        stats = update(
            policy,
            examples,
            config,
            old_is_behaviour=True,
            on_step=lambda *_: (steps.append(list(seen)), seen.clear()),
        ).stats
    finally:
        hook.remove()
    assert stats.grad_steps == 6 and stats.epochs_run == 2 and not stats.early_stopped
    assert len(stats.minibatch_kl) == 6 and stats.minibatch_kl[0] == pytest.approx(0, abs=1e-6)
    for epoch in (steps[:3], steps[3:]):
        calls = [c for step in epoch for c in step]
        assert sorted(calls) == sorted(e.rollout.turn.call_id for e in examples)
        for step in epoch:
            runs_in = {c.rsplit("-", 1)[0] for c in step}
            assert sorted(step) == sorted(f"{r}-c{k}" for r in runs_in for k in (1, 2))


def test_the_first_epoch_runs_to_its_end_and_the_kl_rule_lowers_its_learning_rate(registry):
    """At a learning rate far too high, the first epoch still trains every minibatch, the rule
    lowers the rate where the runs' KL left its path, and a later epoch stops at the budget;
    the KL per run is logged per minibatch."""
    info = registry.get("t-0000")
    policy = load_policy(registry, info)
    runs = [agent_run(policy, info, f"run-{k}", seed=k, task=f"task {k % 3}")[0]
            for k in range(12)]  # fmt: skip
    examples = [Example(c, float(k % 2)) for k, run in enumerate(runs) for c in run]
    config = LearnerConfig(lr=0.3, epochs=4, minibatches=4, micro_batch=4, gate_kl_share=0.5)
    stats = update(policy, examples, config, gate_max_kl=0.2).stats
    assert stats.kl_budget == pytest.approx(0.1) and stats.runs == 12
    assert stats.grad_steps >= 4 and len(stats.minibatch_kl) == stats.grad_steps
    assert stats.lr_scale < 1.0
    assert stats.early_stopped and stats.grad_steps < 16


def _trainer_of(lengths: list[int], advantage: float) -> _Trainer:
    """The learner's loss for runs of ``lengths`` sampled tokens (single answers), each with
    ``advantage``, at the round's start (every ratio 1)."""
    from types import SimpleNamespace as NS

    old = {i: torch.log(torch.full((n,), 0.5)) for i, n in enumerate(lengths)}
    config = LearnerConfig(kl_coef=0.0)
    return _Trainer(NS(device="cpu"), None, [], old, dict(old), [advantage] * len(lengths),  # type: ignore[arg-type]
                    None, config)  # fmt: skip


def _token_weights(trainer: _Trainer, part: list[int], normaliser: float) -> torch.Tensor:
    new = torch.cat([trainer.old[i] for i in part]).clone().requires_grad_(True)
    trainer.micro_loss(part, new, normaliser)[0].backward()
    assert new.grad is not None
    return -new.grad


def test_a_long_and_a_short_run_weigh_the_same_per_token():
    """The loss is every token's loss summed over the round's runs and divided by one constant
    per round: a 10-token run and a 2-token run with the same advantage give every token the
    same weight, alone in a minibatch or together. Failed with a per-run mean (the short run's
    tokens weighed 5x) and with a per-step token mean (a run's weight followed its minibatch)."""
    trainer = _trainer_of([10, 2], advantage=0.5)
    normaliser = loss_normaliser(12, minibatches=2, world=1)
    together = _token_weights(trainer, [0, 1], normaliser)
    assert torch.allclose(together, torch.full((12,), 0.5 / normaliser))
    alone = _token_weights(trainer, [0], normaliser)
    assert torch.allclose(alone, together[:10])
