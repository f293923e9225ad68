"""A policy as it was before an update (``models.snapshot``): the candidate evals sample the
parent from the candidate's own model with the trainable weights of before, and must get what
the parent loaded on its own would give."""

from __future__ import annotations

import pytest
import torch

from checkpoints.weights import load_policy
from models.loading import LoraSettings, with_lora
from models.policy import CausalLMPolicy
from models.sampling import SamplingParams
from models.snapshot import SnapshotPolicy, trainable_snapshot

PARAMS = SamplingParams(max_tokens=12, temperature=1.0)


def _prompts(policy: CausalLMPolicy) -> list[list[int]]:
    return [
        policy.chat_prompt([{"role": "user", "content": f"Write `f{i}(x)`."}]) for i in range(3)
    ]


def _update(policy: CausalLMPolicy, seed: int) -> None:
    """What a training step does to the trainable weights (here: noise)."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in policy.model.parameters():
            if p.requires_grad:
                p.add_(0.3 * torch.randn(p.shape, generator=generator))


@pytest.mark.parametrize("lora", [True, False], ids=["lora", "full"])
def test_the_snapshot_samples_and_scores_as_the_parent_and_leaves_the_candidate(registry, lora):
    parent = load_policy(registry, registry.get("t-0000"))
    candidate = load_policy(registry, registry.get("t-0000"))
    if lora:
        candidate.model = with_lora(candidate.model, LoraSettings(r=4, alpha=8))
        candidate = CausalLMPolicy(candidate.model, candidate.tokenizer)
        _update(candidate, 1)  # a LoRA parent: an adapter of its own, not zero
        parent = CausalLMPolicy(candidate.model, candidate.tokenizer)
        expected = parent.sample(_prompts(parent), PARAMS, torch.Generator().manual_seed(0))
    else:
        expected = parent.sample(_prompts(parent), PARAMS, torch.Generator().manual_seed(0))
    saved = trainable_snapshot(candidate)
    _update(candidate, 2)
    before = candidate.sample(_prompts(candidate), PARAMS, torch.Generator().manual_seed(0))
    assert before != expected  # the update changed what is sampled

    as_parent = SnapshotPolicy(candidate, saved)
    got = as_parent.sample(_prompts(as_parent), PARAMS, torch.Generator().manual_seed(0))
    assert got == expected
    scored = as_parent.score(_prompts(as_parent), [c.token_ids for c in got], 1.0)
    for c, s in zip(got, scored, strict=True):
        assert torch.allclose(torch.tensor(c.logprobs), s, atol=1e-5)
    # and the candidate is itself again after each call
    after = candidate.sample(_prompts(candidate), PARAMS, torch.Generator().manual_seed(0))
    assert after == before


def test_a_snapshot_of_another_model_is_refused(registry):
    policy = load_policy(registry, registry.get("t-0000"))
    with pytest.raises(ValueError, match="lacks"):
        SnapshotPolicy(policy, {"no.such.weight": torch.zeros(1)})
