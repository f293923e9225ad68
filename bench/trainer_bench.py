#!/usr/bin/env python3
"""The trainer's two hot paths on real causal LMs, each beside its limit measured in the same run:

* generation: completion tokens/s of ``CausalLMPolicy.sample`` (batched prompts of different
  lengths, per-token log-probabilities of the sampling distribution, stop checks) against a bare
  ``transformers`` ``generate`` loop on the same prompts and token budget;
* the update: completion tokens/s of ``trainer.learner.update`` (PPO-clip, truncated importance
  weights, chunked log-softmax, accelerate) against a bare torch forward + backward + AdamW step
  on the same padded batch: what the learner's bookkeeping costs.

Models: the tiny test model and SmolLM2-135M-Instruct (``--models``), full fine-tuning and LoRA.
On a GPU (``--device cuda``) the same figures and the update's MFU (6 x parameters x tokens/s
over the chip's bf16 peak, ``--peak-tflops``). On a CPU, the compute limit is measured in the
same run: a 2,048-square float32 matmul's GFLOP/s (the best of a few), beside each path's model
GFLOP/s, counted as in MFU (N parameters, embeddings included; attention's own flops left out):
generation 2N per generated token (the prompts' prefill not counted); the update, per token of
every sequence it processes (prompt and completion), 2N for each forward pass (the scoring of
pi_old before the first step and of the final weights after the last, and each epoch's) and,
each epoch, 4N more for the backward of full fine-tuning or 2N for LoRA's (the gradients of the
activations only; the adapter's own weight gradients are negligible). Figures to stdout and
``bench/out/trainer.json``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    format_table,
    machine,
    matmul_peak_gflops,
    reexec_in_venv,
    write_results,
)

reexec_in_venv(__file__)
os.environ.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})

import torch  # noqa: E402

from checkpoints.store import CheckpointRegistry  # noqa: E402
from checkpoints.weights import load_policy, register_base  # noqa: E402
from models.catalog import fetch, models_dir  # noqa: E402
from models.examples import Example  # noqa: E402
from models.loading import LoraSettings  # noqa: E402
from models.policy import CausalLMPolicy, score_batch  # noqa: E402
from models.rollout import Rollout  # noqa: E402
from models.sampling import SamplingParams  # noqa: E402
from trainer.learner import LearnerConfig, update  # noqa: E402

TASKS = [
    "slugify(s)",
    "reverse(xs)",
    "count_words(text)",
    "is_prime(n)",
    "flatten(items)",
    "dedupe(xs)",
    "clamp(value, lo, hi)",
    "mean(xs)",
    "merge(a, b)",
    "chunks(xs, n)",
]


def prompts(policy: CausalLMPolicy, n: int) -> list[list[int]]:
    return [
        policy.chat_prompt(
            [
                {
                    "role": "user",
                    "content": f"Write `{TASKS[i % len(TASKS)]}` in Python{'.' * (i % 4)}",
                }
            ]
        )
        for i in range(n)
    ]


def bench_generation(policy: CausalLMPolicy, batch: int, tokens: int) -> tuple[float, float]:
    """(ours, bare generate) completion tokens/s; neither stops early (no end token)."""
    asks = prompts(policy, batch)
    params = SamplingParams(max_tokens=tokens)
    saved = policy.end_ids
    policy.end_ids = frozenset()  # the same token budget for both
    started = time.perf_counter()
    done = policy.sample(asks, params, torch.Generator(policy.device).manual_seed(0))
    ours = sum(len(d.token_ids) for d in done) / (time.perf_counter() - started)
    policy.end_ids = saved
    width = max(map(len, asks))
    ids = torch.full((batch, width), policy.pad_id, dtype=torch.long)
    mask = torch.zeros((batch, width), dtype=torch.long)
    for i, a in enumerate(asks):
        ids[i, width - len(a) :] = torch.tensor(a)
        mask[i, width - len(a) :] = 1
    ids, mask = ids.to(policy.device), mask.to(policy.device)
    started = time.perf_counter()
    with torch.no_grad():
        out = policy.model.generate(
            input_ids=ids,
            attention_mask=mask,
            do_sample=True,
            max_new_tokens=tokens,
            min_new_tokens=tokens,
            pad_token_id=policy.pad_id,
            top_k=0,
        )
    bare = (out.shape[1] - width) * batch / (time.perf_counter() - started)
    return ours, bare


def examples_for(policy: CausalLMPolicy, base: Rollout, n: int, tokens: int) -> list[Example]:
    asks = prompts(policy, n)
    done = policy.sample(
        asks, SamplingParams(max_tokens=tokens), torch.Generator(policy.device).manual_seed(1)
    )
    out = []
    for i, (a, d) in enumerate(zip(asks, done, strict=True)):
        rollout = Rollout(f"i{i}", base.checkpoint_id, base.model, SamplingParams(
            max_tokens=tokens), tuple(a), d.token_ids, d.logprobs, d.finish_reason,
            base.created_at)  # fmt: skip
        out.append(Example(rollout, float(i % 3) - 1.0))
    return out


def bare_update(policy: CausalLMPolicy, batch: list[Example], steps: int) -> float:
    """A bare torch forward + backward + AdamW step on the same padded batch: tokens/s."""
    model = policy.model
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=1e-6)
    b = score_batch(
        [e.rollout.prompt_ids for e in batch],
        [e.rollout.completion_ids for e in batch],
        policy.pad_id,
        policy.device,
    )
    tokens = sum(b.lengths)
    model.train()
    started = time.perf_counter()
    for step in range(steps + 1):  # the first step warms up and is not timed
        if step == 1:
            started = time.perf_counter()
        logits = model(input_ids=b.input_ids, attention_mask=b.attention_mask).logits
        flat = logits.reshape(-1, logits.shape[-1]).index_select(0, b.positions)
        loss = -torch.log_softmax(flat.float(), -1).gather(-1, b.targets[:, None]).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    if policy.device.type == "cuda":
        torch.cuda.synchronize()
    return tokens * steps / (time.perf_counter() - started)


def update_flops(params: int, batch: list[Example], epochs: int, lora: bool) -> float:
    """The model FLOPs of ``trainer.learner.update`` on ``batch`` (the module docstring's
    accounting)."""
    tokens = sum(len(e.rollout.prompt_ids) + len(e.rollout.completion_ids) for e in batch)
    backward = 2 if lora else 4
    return 2 * params * tokens * (2 + epochs) + backward * params * tokens * epochs


def bench_model(name: str, device: str, batch: int, tokens: int, peak: float,
                cpu_peak: float) -> list[list]:  # fmt: skip
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        registry = CheckpointRegistry(Path(tmp))
        root = register_base(registry, "b-0000", fetch(name, models_dir()))
        for lora in (None, LoraSettings(r=8)):
            policy = load_policy(registry, root, new_lora=lora).to(device)
            kind = "lora r8" if lora else "full"
            params = sum(p.numel() for p in policy.model.parameters())
            if lora is None:
                ours, bare = bench_generation(policy, batch, tokens)
                gflops = 2 * params * ours / 1e9
                rows.append(
                    [
                        name,
                        "generate",
                        f"{batch}x{tokens}",
                        round(ours),
                        round(bare),
                        round(ours / bare, 2),
                        round(gflops, 1),
                        f"{gflops / cpu_peak:.0%}" if device == "cpu" else "-",
                        "-",
                    ]
                )
            base = Rollout(
                "i",
                "b-0000",
                root.model.identity(),
                SamplingParams(max_tokens=tokens),
                (1,),
                (1,),
                (-1.0,),
                "length",
                "2026-12-01T00:00:00Z",
            )
            batch_examples = examples_for(policy, base, batch, tokens)
            bare = bare_update(policy, batch_examples, steps=2)
            config = LearnerConfig(lr=1e-6, epochs=2, minibatch=batch, micro_batch=batch)
            stats = update(policy, batch_examples, config).stats
            # the learner also scores every example twice without gradients (pi_old, final KL)
            ours = stats.tokens_per_s
            mfu = (6 * params * ours / (peak * 1e12)) if device == "cuda" else None
            gflops = update_flops(params, batch_examples, config.epochs, lora is not None)
            gflops /= stats.seconds * 1e9
            rows.append(
                [
                    name,
                    f"update {kind}",
                    f"{batch}x{tokens}",
                    round(ours),
                    round(bare),
                    round(ours / bare, 2),
                    round(gflops, 1),
                    f"{gflops / cpu_peak:.0%}" if device == "cpu" else "-",
                    f"{mfu:.1%}" if mfu is not None else "-",
                ]
            )
            del policy
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--models", default="tiny,smollm2-135m")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--tokens", type=int, default=48)
    parser.add_argument(
        "--peak-tflops",
        type=float,
        default=989.0,
        help="the chip's dense bf16 peak, for MFU (H100/H200 SXM: 989)",
    )
    args = parser.parse_args()
    rows = []
    cpu_peak = matmul_peak_gflops(args.device)
    print(f"compute limit: a 2048x2048 float32 matmul at {cpu_peak:.1f} GFLOP/s "
          f"({torch.get_num_threads()} threads)")  # fmt: skip
    for name in args.models.split(","):
        rows += bench_model(name, args.device, args.batch, args.tokens, args.peak_tflops,
                            cpu_peak)  # fmt: skip
    print(
        format_table(
            [
                "model",
                "path",
                "batch",
                "tokens/s",
                "limit tokens/s",
                "ratio to its limit",
                "GFLOP/s",
                "of matmul peak",
                "MFU",
            ],
            rows,
        )  # fmt: skip
    )
    write_results(
        "trainer",
        {
            "machine": machine(),
            "device": args.device,
            "matmul_peak_gflops": cpu_peak,
            "rows": [
                dict(
                    zip(
                        [
                            "model",
                            "path",
                            "batch",
                            "tokens_per_s",
                            "limit_tokens_per_s",
                            "ratio",
                            "gflops",
                            "of_matmul_peak",
                            "mfu",
                        ],
                        r,
                        strict=True,
                    )
                )
                for r in rows
            ],
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
