"""The PPO learner and the off-policy estimate on a bandit whose answer is known.

The bandit: the reward of a completion is the share of its tokens in a "good" set (ids below a
quarter of the vocabulary), so a fresh policy earns about 0.25 and training should raise that.
"""

from __future__ import annotations

import math

import pytest
import torch

from trainer.examples import Example
from trainer.learner import LearnerConfig, UpdateStats, update
from trainer.offpolicy import estimate
from trainer.policy import Policy, PolicyConfig, new_policy, sample
from trainer.rollout import Rollout

CONFIG = PolicyConfig(vocab_size=8, hidden=16, max_new_tokens=4)
GOOD = CONFIG.vocab_size // 4
PROMPTS = ([1, 2], [3, 2], [5, 2])
TS = "2026-11-30T10:00:00Z"


def bandit_reward(ids: list[int] | tuple[int, ...]) -> float:
    return sum(token < GOOD for token in ids) / len(ids)


def rollouts(policy: Policy, n: int, seed: int, prompts=PROMPTS) -> list[Example]:
    generator = torch.Generator().manual_seed(seed)
    examples = []
    for i in range(n):
        prompt = prompts[i % len(prompts)]
        ids, logprobs = sample(policy, prompt, generator)
        rollout = Rollout(f"i{i}", "c0", tuple(prompt), tuple(ids), tuple(logprobs), TS)
        examples.append(Example(rollout, bandit_reward(ids)))
    return examples


def fresh_mean_reward(policy: Policy, n: int = 300) -> float:
    """Mean reward of new samples, always with the same generator."""
    return sum(e.reward for e in rollouts(policy, n, seed=12345)) / n


def weights(policy: Policy) -> dict[str, torch.Tensor]:
    return {name: tensor.clone() for name, tensor in policy.state_dict().items()}


def same_weights(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.fixture(scope="module")
def trained() -> tuple[Policy, dict[str, torch.Tensor], list[Example], Policy, UpdateStats]:
    """Behaviour policy, its weights before the update, its rollouts, the trained copy, stats."""
    behaviour = new_policy(CONFIG, seed=0)
    before = weights(behaviour)
    examples = rollouts(behaviour, 300, seed=1)
    candidate, stats = update(behaviour, examples, LearnerConfig())
    return behaviour, before, examples, candidate, stats


def test_update_raises_the_reward_of_fresh_samples(trained) -> None:
    behaviour, _, _, candidate, _ = trained
    before, after = fresh_mean_reward(behaviour), fresh_mean_reward(candidate)
    assert after > before + 0.08, (before, after)


def test_update_moves_probability_mass_to_the_good_tokens(trained) -> None:
    behaviour, _, _, candidate, _ = trained

    def good_mass(policy: Policy) -> float:
        with torch.no_grad():
            logits, _ = policy(torch.tensor(PROMPTS))
        return float(torch.softmax(logits[:, -1], dim=-1)[:, :GOOD].sum(dim=-1).mean())

    assert good_mass(candidate) > good_mass(behaviour) + 0.1


def test_update_trains_a_copy_and_leaves_the_given_policy_alone(trained) -> None:
    behaviour, before, _, candidate, _ = trained
    assert candidate is not behaviour
    assert same_weights(weights(behaviour), before)
    changed = {name for name, tensor in candidate.state_dict().items()
               if not torch.equal(tensor, before[name])}  # fmt: skip
    assert changed == set(before)  # every parameter learned something


def test_update_stats_describe_the_update(trained) -> None:
    _, _, examples, _, stats = trained
    assert stats.n_examples == 300 and stats.epochs == 4 and stats.has_signal
    assert stats.grad_steps == 4 * math.ceil(300 / 64)
    assert stats.mean_reward == pytest.approx(sum(e.reward for e in examples) / 300)
    assert 0.0 < stats.clip_fraction <= 1.0
    assert stats.approx_kl > 0.0
    assert stats.loss_last < stats.loss_first  # the surrogate objective went up


def test_update_is_deterministic_and_seeded() -> None:
    behaviour = new_policy(CONFIG, seed=3)
    examples = rollouts(behaviour, 60, seed=4)
    config = LearnerConfig(minibatch=16, epochs=2, seed=7)
    first, first_stats = update(behaviour, examples, config)
    again, again_stats = update(behaviour, examples, config)
    other, _ = update(behaviour, examples, LearnerConfig(minibatch=16, epochs=2, seed=8))
    assert same_weights(weights(first), weights(again))
    assert first_stats == again_stats
    assert not same_weights(weights(first), weights(other))  # the seed orders the minibatches


def test_update_leaves_torch_global_rng_alone() -> None:
    behaviour = new_policy(CONFIG, seed=3)
    examples = rollouts(behaviour, 20, seed=4)
    state = torch.random.get_rng_state()
    update(behaviour, examples, LearnerConfig(epochs=1))
    assert torch.equal(state, torch.random.get_rng_state())


def test_equal_rewards_change_nothing_and_say_so() -> None:
    behaviour = new_policy(CONFIG, seed=3)
    examples = [Example(e.rollout, 0.5) for e in rollouts(behaviour, 30, seed=4)]
    candidate, stats = update(behaviour, examples, LearnerConfig())
    assert same_weights(weights(candidate), weights(behaviour))
    assert candidate is not behaviour
    assert not stats.has_signal and stats.grad_steps == 0 and stats.mean_reward == 0.5
    assert stats.approx_kl == pytest.approx(0.0, abs=1e-5)


def test_examples_of_different_lengths_train_in_their_own_groups() -> None:
    behaviour = new_policy(CONFIG, seed=3)
    examples = rollouts(behaviour, 20, seed=4, prompts=([1, 2],))
    examples += rollouts(behaviour, 10, seed=5, prompts=([1, 2, 3],))
    short = Rollout("s", "c0", (1,), (0, 1), (-1.0, -1.0), TS)  # a shorter completion
    examples.append(Example(short, 1.0))
    candidate, stats = update(behaviour, examples, LearnerConfig(minibatch=8, epochs=1))
    assert stats.grad_steps == math.ceil(20 / 8) + math.ceil(10 / 8) + 1
    assert not same_weights(weights(candidate), weights(behaviour))


def test_tokens_outside_the_vocabulary_are_refused() -> None:
    behaviour = new_policy(CONFIG, seed=3)
    bad = Rollout("b", "c0", (1, 2), (0, 1, 2, CONFIG.vocab_size), (-1.0,) * 4, TS)
    with pytest.raises(ValueError, match="example 0: completion_ids"):
        update(behaviour, [Example(bad, 1.0)], LearnerConfig())
    with pytest.raises(ValueError, match="at least one example"):
        update(behaviour, [], LearnerConfig())


@pytest.mark.parametrize("field, value", [
    ("lr", 0.0), ("lr", math.nan), ("epochs", 0), ("epochs", 1.5), ("minibatch", 0),
    ("clip", 0.0), ("clip", 1.0), ("max_grad_norm", -1.0), ("seed", -1), ("seed", True),
])  # fmt: skip
def test_learner_config_refuses_bad_values(field: str, value: object) -> None:
    with pytest.raises(ValueError, match=f"LearnerConfig.{field}"):
        LearnerConfig(**{field: value})  # type: ignore[arg-type]


# --- off-policy estimate --------------------------------------------------------------------

def test_estimate_of_the_behaviour_policy_is_its_plain_mean(trained) -> None:
    behaviour, _, examples, _, _ = trained
    same = estimate(behaviour, examples)
    assert same.n == 300
    assert same.value == pytest.approx(same.behaviour_mean, abs=1e-5)
    assert same.ess == pytest.approx(300, rel=1e-5)
    assert same.kl == pytest.approx(0.0, abs=1e-4)


def test_estimate_of_the_trained_policy_sees_its_gain(trained) -> None:
    behaviour, _, examples, candidate, _ = trained
    judged = estimate(candidate, examples)
    rewards = [e.reward for e in examples]
    true_gain = fresh_mean_reward(candidate) - fresh_mean_reward(behaviour)
    assert judged.gain > 0.05 and true_gain > 0  # same sign, and clearly positive
    assert min(rewards) <= judged.value <= max(rewards)  # a convex mix of observed rewards
    assert 1 <= judged.ess < 300 and judged.kl > 0


def test_estimate_needs_examples(trained) -> None:
    with pytest.raises(ValueError, match="at least one example"):
        estimate(trained[0], [])
