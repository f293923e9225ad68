"""pi_old without a scoring pass: a round whose mismatch check finds the recorded behaviour
log-probs to be the served weights' own (``LearnerConfig.exact_behaviour_kl``) trains from
them, and ends where the round that scores every example first ends; a batch recorded a little
off (inside the quarantine limit, outside the exact one) is scored as before."""

from __future__ import annotations

import dataclasses

import torch

from checkpoints.weights import load_policy
from models.examples import Example
from release.gate import GateConfig
from tests.support.checkpoints import serve, write_batch
from tests.support.rounds import round_options
from trainer.learner import LearnerConfig
from trainer.mismatch import check_batches
from trainer.train import train_round

LEARNER = LearnerConfig(lr=2e-3, epochs=2, minibatches=2, micro_batch=8, mismatch_sample=16,
                        exact_behaviour_kl=1e-4)  # fmt: skip
GATE = GateConfig(eval_prompts=0, min_examples=1, min_gain=-100, max_kl=100)


def _weights(registry, checkpoint_id: str) -> list[torch.Tensor]:
    policy = load_policy(registry, registry.get(checkpoint_id))
    return [p.detach().clone() for p in policy.model.parameters()]


def _off(examples: list[Example], gap: float) -> list[Example]:
    """The same rollouts with their recorded log-probs ``gap`` above and below by turns, as
    another engine's kernels would give (k3 about ``gap**2 / 2``, k1 about 0)."""
    return [
        dataclasses.replace(e, rollout=dataclasses.replace(e.rollout, logprobs=tuple(
            x + (gap if k % 2 else -gap) for k, x in enumerate(e.rollout.logprobs))))
        for e in examples
    ]  # fmt: skip


def test_exact_behaviour_log_probs_stand_for_pi_old_and_train_the_same_weights(registry, tmp_path):
    root = registry.get("t-0000")
    examples = serve(load_policy(registry, root), root, 48, seed=5)
    batch = [("b-1", [write_batch(tmp_path / "b1.parquet", examples, "b-1")])]
    rounds = {
        "t-0001": LEARNER,
        "t-0002": dataclasses.replace(LEARNER, exact_behaviour_kl=0.0),  # always score
    }
    for candidate, learner in rounds.items():
        options = round_options(registry, learner, GATE, held_out=0.3)
        assert train_round(registry, "t-0000", batch, candidate, options, alarms=[]) is not None
    taken = registry.get("t-0001").evals["update"]
    scored = registry.get("t-0002").evals["update"]
    assert taken["old_logprobs"] == "behaviour" and scored["old_logprobs"] == "scored"
    assert taken["grad_steps"] == scored["grad_steps"] > 1
    assert scored["behaviour_ratio_dev"] < 1e-3  # the tiny model's sampler records its own
    start, behaviour, rescored = (_weights(registry, c) for c in ("t-0000", "t-0001", "t-0002"))
    moved = max(float((b - a).abs().max()) for a, b in zip(start, rescored, strict=True))
    apart = max(float((b - a).abs().max()) for a, b in zip(behaviour, rescored, strict=True))
    assert moved > 1e-3 and apart < 1e-2 * moved, (moved, apart)


def test_log_probs_a_little_off_are_scored_as_before(registry, tmp_path):
    root = registry.get("t-0000")
    examples = _off(serve(load_policy(registry, root), root, 48, seed=6), 0.03)
    batch = [("b-2", [write_batch(tmp_path / "b2.parquet", examples, "b-2")])]
    options = round_options(registry, LEARNER, GATE, held_out=0.3)
    result = train_round(registry, "t-0000", batch, "t-0001", options, alarms=[])
    assert result is not None
    record = result.candidate.evals
    assert record["quarantined"] == {}  # inside the quarantine limit (0.02)
    assert record["mismatch"]["b-2"]["k3"] > LEARNER.exact_behaviour_kl
    assert record["update"]["old_logprobs"] == "scored"
    assert record["update"]["behaviour_ratio_dev"] > 0.02


def test_a_round_of_many_batches_checks_a_capped_sample_and_still_finds_the_one_off(registry):
    """A service's round: 12 small batches, one recorded off (k3 ~0.045, past the quarantine
    limit). Under a cap of 16 the check scores 2 rollouts of each (24, not the 48 it would
    otherwise), and still quarantines the off batch alone."""
    root = registry.get("t-0000")
    policy = load_policy(registry, root)
    examples = serve(policy, root, 48, seed=9)
    batches = {f"b-{k}": examples[4 * k : 4 * k + 4] for k in range(12)}
    batches["b-7"] = _off(batches["b-7"], 0.3)
    capped = check_batches(policy, batches, 16, 0.02, round_max=16)
    assert {b: m.rollouts for b, m in capped.items()} == dict.fromkeys(batches, 2)
    assert [b for b, m in capped.items() if m.reason] == ["b-7"], capped
    whole = check_batches(policy, batches, 16, 0.02)
    assert sum(m.rollouts for m in whole.values()) == 48
