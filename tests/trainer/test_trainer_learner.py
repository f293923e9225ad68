"""The PPO update on the tiny model: what it changes (every trainable parameter; with LoRA the
adapter only), that it starts exactly on-policy, that it learns the hidden taste, and the parts
that keep it inside what the gate accepts (a later epoch's stop at a target KL, the KL penalty)."""

from __future__ import annotations

import pytest
import torch

from checkpoints.weights import load_policy
from models.examples import Example
from models.loading import LoraSettings
from models.sampling import SamplingParams
from models.scoring import score_examples
from release.offpolicy import estimate
from tests.support.checkpoints import PARAMS, low_token_share, serve
from trainer.learner import LearnerConfig, update

FAST = LearnerConfig(lr=2e-3, epochs=2, minibatches=3, micro_batch=8)


def _policy_and_examples(registry, n=48, lora=None, params=PARAMS, seed=0):
    info = registry.get("t-0000")
    policy = load_policy(registry, info, new_lora=lora)
    return policy, serve(policy, info, n, seed=seed, params=params)


def test_one_update_changes_every_parameter_and_starts_on_policy(registry):
    policy, examples = _policy_and_examples(registry)
    # Mixed lengths on both sides, so the update sees left-padded prompts and completions that
    # stopped at an end token before max_tokens (the masked tail).
    assert len({len(e.rollout.prompt_ids) for e in examples}) > 1
    assert len({len(e.rollout.completion_ids) for e in examples}) > 1
    before = {n: p.detach().clone() for n, p in policy.model.named_parameters()}
    result = update(policy, examples, FAST)
    assert result.stats.has_signal and result.stats.grad_steps == 6  # 2 epochs of 3 steps
    assert result.stats.behaviour_ratio_dev < 1e-5  # pi_old / mu == 1 before any step
    after = dict(policy.model.named_parameters())
    unchanged = [n for n in before if torch.equal(before[n], after[n])]
    assert unchanged == []


def test_the_first_ratio_is_one_under_temperature_and_nucleus_too(registry):
    params = SamplingParams(max_tokens=6, temperature=0.6, top_p=0.85)
    policy, examples = _policy_and_examples(registry, n=24, params=params)
    result = update(policy, examples, LearnerConfig(lr=1e-3, epochs=1, minibatches=2))
    assert result.stats.behaviour_ratio_dev < 1e-5


def test_with_lora_only_the_adapter_moves(registry):
    policy, examples = _policy_and_examples(registry, lora=LoraSettings(r=4))
    trainable = {n for n, p in policy.model.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n for n in trainable)
    before = {n: p.detach().clone() for n, p in policy.model.named_parameters()}
    update(policy, examples, FAST)
    after = dict(policy.model.named_parameters())
    changed = {n for n in before if not torch.equal(before[n], after[n])}
    assert changed == trainable


def test_the_update_learns_the_hidden_taste(registry):
    policy, examples = _policy_and_examples(registry, n=256, seed=1)
    info = registry.get("t-0000")

    def taste() -> float:
        fresh = serve(policy, info, 128, seed=99)
        return sum(low_token_share(policy, e.rollout.completion_ids) for e in fresh) / 128

    before = taste()
    config = LearnerConfig(lr=1e-2, epochs=6, minibatches=4, micro_batch=32)
    # a gate that allows 10 nats a run: the taste moves 0.1 at about 2.5 nats a run (the KL
    # rule has its tests in test_run_advantages.py)
    update(policy, examples, config, gate_max_kl=10.0)
    assert taste() > before + 0.05


def test_same_seed_same_weights_and_equal_rewards_change_nothing(registry):
    policy, examples = _policy_and_examples(registry, n=24)
    again, _ = _policy_and_examples(registry, n=24)
    update(policy, examples, FAST)
    update(again, examples, FAST)
    assert all(
        torch.equal(a, b)
        for a, b in zip(policy.model.parameters(), again.model.parameters(), strict=True)
    )
    flat, _ = _policy_and_examples(registry, n=24)
    before = [p.detach().clone() for p in flat.model.parameters()]
    same = [Example(e.rollout, 0.5) for e in examples]
    result = update(flat, same, FAST)
    assert not result.stats.has_signal and result.stats.grad_steps == 0
    assert all(torch.equal(a, b) for a, b in zip(before, flat.model.parameters(), strict=True))


def test_a_later_epoch_stops_at_the_target_kl_but_never_the_first(registry):
    """The target KL per token ends a later epoch, never the first: every run is trained on
    once (it used to end the update after a few minibatches of random calls)."""
    policy, examples = _policy_and_examples(registry)
    config = LearnerConfig(lr=5e-2, epochs=4, minibatches=4, micro_batch=8, target_kl=1e-4)
    result = update(policy, examples, config)
    assert result.stats.early_stopped and 4 <= result.stats.grad_steps < 16
    assert len(result.stats.minibatch_kl) == result.stats.grad_steps


def test_the_kl_penalty_needs_and_uses_the_reference(registry):
    policy, examples = _policy_and_examples(registry, n=24)
    config = LearnerConfig(lr=1e-2, epochs=2, minibatches=2, kl_coef=0.5)
    with pytest.raises(ValueError, match="reference"):
        update(policy, examples, config)
    reference = score_examples(policy, examples)
    result = update(policy, examples, config, reference=reference)
    assert result.stats.ref_kl > 0


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("lr", 0),
        ("epochs", 0),
        ("minibatches", 1),
        ("minibatches", 5),
        ("gate_kl_share", 0.0),
        ("gate_kl_share", 1.5),
        ("adv_scale", 0.0),
        ("clip", 1.0),
        ("tis_cap", 0.5),
        ("kl_coef", -1),
        ("micro_batch", 0),
        ("save_every", -1),
    ],
)
def test_learner_config_refuses_bad_values(field, value):
    with pytest.raises(ValueError, match=field):
        LearnerConfig(**{field: value})


def test_the_estimate_of_the_behaviour_policy_on_its_own_rollouts_is_its_mean(registry):
    policy, examples = _policy_and_examples(registry, n=40)
    same = estimate(policy, examples)
    assert same.value == pytest.approx(same.behaviour_mean, abs=1e-6)
    assert same.ess == pytest.approx(40, rel=1e-4) and abs(same.kl) < 1e-5
