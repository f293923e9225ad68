"""The train/serve mismatch check's figures: the mismatch KL per token (``trainer.mismatch``) of
rollouts sampled at T = 0.7 from the tiny model with its logits scaled by k, when the recorded
log-probabilities are the processed ones (of the distribution sampled from) and when they are
the raw ones (the model's softmax at T = 1, vLLM's default ``raw_logprobs``).

    .venv/bin/python bench/mismatch_kl.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch

from checkpoints.store import CheckpointRegistry
from checkpoints.weights import load_policy, register_base
from models.sampling import SamplingParams
from models.tiny_model import ensure_tiny_model
from trainer.learner import LearnerConfig
from trainer.mismatch import mismatch_of

TEMPERATURE, ROLLOUTS, TOKENS = 0.7, 64, 6


def main() -> None:
    root = Path(tempfile.mkdtemp())
    registry = CheckpointRegistry(root / "ckpt")
    info = register_base(registry, "t-0000", ensure_tiny_model(root / "models"))
    limit = LearnerConfig().max_mismatch_kl
    print(f"limit {limit} nats/token; {ROLLOUTS} rollouts of {TOKENS} tokens at T {TEMPERATURE}")
    print("| logit scale | nats/token sampled | recorded | k1 | k3 | quarantined |")
    print("|---:|---:|---|---:|---:|---|")
    for scale in (1.0, 2.0, 4.0, 8.0):
        policy = load_policy(registry, info)
        with torch.no_grad():
            policy.model.model.norm.weight.mul_(scale)
        generator = torch.Generator().manual_seed(0)
        prompts = [
            policy.chat_prompt([{"role": "user", "content": f"Write `reverse(xs)` #{i}."}])
            for i in range(ROLLOUTS)
        ]
        params = SamplingParams(temperature=TEMPERATURE, max_tokens=TOKENS)
        done = policy.sample(prompts, params, generator)
        ids = [list(d.token_ids) for d in done]
        with torch.no_grad():
            served = [s.tolist() for s in policy.score(prompts, ids, TEMPERATURE, 1.0)]
            raw = [s.tolist() for s in policy.score(prompts, ids, 1.0, 1.0)]
        entropy = -sum(map(sum, served)) / sum(map(len, served))
        for name, recorded in (("processed", [list(d.logprobs) for d in done]), ("raw", raw)):
            m = mismatch_of(recorded, served, limit)
            print(f"| {scale:g} | {entropy:.2f} | {name} | {m.k1:+.4f} | {m.k3:.4f} | "
                  f"{'yes' if m.reason else 'no'} |")  # fmt: skip


if __name__ == "__main__":
    main()
