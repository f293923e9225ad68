#!/usr/bin/env python3
"""The trainer's two hot paths on real causal LMs, each beside its limit measured in the same run:

* generation: completion tokens/s of ``CausalLMPolicy.sample`` (batched prompts of different
  lengths, per-token log-probabilities of the sampling distribution, stop checks) against a bare
  ``transformers`` ``generate`` loop on the same prompts and token budget;
* the update: completion tokens/s of ``trainer.learner.update`` (PPO-clip, truncated importance
  weights, chunked log-softmax, accelerate) against a bare torch forward + backward + AdamW step
  on the same padded batch: what the learner's bookkeeping costs.

Models (``--models``): the tiny test model, SmolLM2-135M-Instruct (its GGUF file, dequantized)
and ``smollm2-135m-random``: SmolLM2-135M's exact shape (Llama, vocabulary 49,152, hidden 576,
MLP 1,536, 30 layers, 9 attention heads and 3 key-value heads, tied embeddings, rope theta
100,000) built from a config with random weights, for machines the GGUF file cannot reach (the
GPU device machine: the working tree that travels there holds at most 64 MiB). Its figures are
the real model's speed, not its quality: throughput and MFU depend on the shape, not on the
weights' values. Its tokenizer is the tiny model's (432 tokens, all of them ids the 49,152-row
embedding holds), so prompts are the same chats; sampled ids outside that vocabulary decode to
no text, which only the (unused here) stop strings would read. Full fine-tuning and LoRA.

On a GPU (``--device cuda``) the policy runs in float32 weights and the learner through
``models.devices.make_accelerator`` (bf16 autocast where the GPU has it), as ``rtrl train
--device cuda`` does; the bare update step runs under the same bf16 autocast. The compute limit
there is an 8,192-square bf16 matmul's TFLOP/s (the best of a few), and MFU is each path's model
FLOP/s over the chip's dense bf16 peak (``--peak-tflops``). On a CPU, the compute limit is a
2,048-square float32 matmul's GFLOP/s (the best of a few). Either way model FLOPs are counted as
in MFU (N parameters, embeddings included; attention's own flops left out): generation 2N per
generated token (the prompts' prefill not counted); the update, per token of every sequence it
processes (prompt and completion), 2N for each forward pass (the scoring of pi_old before the
first step and of the final weights after the last, and each epoch's) and, each epoch, 4N more
for the backward of full fine-tuning or 2N for LoRA's (the gradients of the activations only;
the adapter's own weight gradients are negligible). The update's tokens/s is the learner's own
figure: completion tokens times epochs over the whole update's seconds; on a GPU after one
untimed update on the same batch, as the bare step's first step is untimed (the first call of
either pays one-time costs: kernel choice, the allocator's growth, accelerate's setup).
Figures to stdout and ``bench/out/trainer.json``.

Runs under the repo's ``.venv`` when there is one (it re-executes into it) and under any other
``python3`` that has torch, transformers, accelerate, peft and the project's imports when there
is none (the device machine).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

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
from models.catalog import TINY, fetch, models_dir  # noqa: E402
from models.devices import make_accelerator  # noqa: E402
from models.examples import Example  # noqa: E402
from models.loading import LoraSettings  # noqa: E402
from models.policy import CausalLMPolicy  # noqa: E402
from models.rollout import Rollout  # noqa: E402
from models.sampling import SamplingParams  # noqa: E402
from models.token_scorer import score_batch  # noqa: E402
from trainer.learner import LearnerConfig, update  # noqa: E402

RANDOM_SMOLLM2 = "smollm2-135m-random"
SMOLLM2_SHAPE: dict[str, Any] = {
    "vocab_size": 49152,
    "hidden_size": 576,
    "intermediate_size": 1536,
    "num_hidden_layers": 30,
    "num_attention_heads": 9,
    "num_key_value_heads": 3,
    "tie_word_embeddings": True,
    "max_position_embeddings": 2048,
    "rope_theta": 100000.0,
    "rms_norm_eps": 1e-5,
}

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


def build_random_smollm2(out: Path) -> Path:
    """A model directory with SmolLM2-135M's shape, random weights (seed 0) and the tiny model's
    tokenizer (see the module docstring)."""
    from transformers import AutoTokenizer, LlamaConfig

    from models.tiny_model import save_random_llama

    tokenizer = AutoTokenizer.from_pretrained(str(fetch(TINY, models_dir())), local_files_only=True)
    if len(tokenizer) > SMOLLM2_SHAPE["vocab_size"]:
        raise ValueError(f"the tiny tokenizer's {len(tokenizer)} tokens do not fit the shape")
    config = LlamaConfig(**SMOLLM2_SHAPE, attention_dropout=0.0, bos_token_id=None,
                         eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id)  # fmt: skip
    return save_random_llama(config, tokenizer, out)


def model_dir(name: str, tmp: Path) -> Path:
    if name == RANDOM_SMOLLM2:
        return build_random_smollm2(tmp / RANDOM_SMOLLM2)
    return fetch(name, models_dir())


def matmul_peak(device: str) -> tuple[float, str]:
    """The device's compute limit in GFLOP/s and what was measured: on a CPU ``_common``'s
    float32 matmul, on a GPU the best of eight 8,192-square bf16 matmuls (after a warm-up)."""
    if device != "cuda":
        return matmul_peak_gflops(device), (
            f"a 2048x2048 float32 matmul ({torch.get_num_threads()} threads)"
        )
    n = 8192
    a, b = (torch.randn(n, n, device=device, dtype=torch.bfloat16) for _ in range(2))
    best = float("inf")
    for _ in range(9):  # the first one warms up
        torch.cuda.synchronize()
        started = time.perf_counter()
        torch.mm(a, b)
        torch.cuda.synchronize()
        best = min(best, time.perf_counter() - started)
    return 2 * n**3 / best / 1e9, f"a {n}x{n} bf16 matmul on {torch.cuda.get_device_name()}"


def sync(device: torch.device | str) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


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
    # one short untimed call first: kernels, allocator and (on a GPU) cuBLAS warm for both
    policy.sample(asks, SamplingParams(max_tokens=2), torch.Generator(policy.device).manual_seed(2))
    sync(policy.device)
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
    sync(policy.device)
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
    cuda = policy.device.type == "cuda"
    model.train()
    started = time.perf_counter()
    for step in range(steps + 1):  # the first step warms up and is not timed
        if step == 1:
            sync(policy.device)
            started = time.perf_counter()
        # the learner's precision on a GPU: accelerate's bf16 autocast over float32 weights
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=cuda):
            logits = model(input_ids=b.input_ids, attention_mask=b.attention_mask).logits
        flat = logits.reshape(-1, logits.shape[-1]).index_select(0, b.positions)
        loss = -torch.log_softmax(flat.float(), -1).gather(-1, b.targets[:, None]).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    sync(policy.device)
    return tokens * steps / (time.perf_counter() - started)


def update_flops(params: int, batch: list[Example], epochs: int, lora: bool) -> float:
    """The model FLOPs of ``trainer.learner.update`` on ``batch`` (the module docstring's
    accounting)."""
    tokens = sum(len(e.rollout.prompt_ids) + len(e.rollout.completion_ids) for e in batch)
    backward = 2 if lora else 4
    return 2 * params * tokens * (2 + epochs) + backward * params * tokens * epochs


def bench_model(name: str, device: str, batch: int, tokens: int, peak_tflops: float,
                limit_gflops: float) -> list[list]:  # fmt: skip
    """Rows of generation and the full and LoRA updates; ``limit_gflops`` the measured matmul's,
    ``peak_tflops`` the chip's (for MFU, on a GPU)."""
    rows = []
    accelerator = make_accelerator(device)
    print(f"{name}: accelerator on {accelerator.device}, mixed precision "
          f"{accelerator.mixed_precision}", file=sys.stderr, flush=True)  # fmt: skip

    def row(path: str, ours: float, bare: float, gflops: float) -> list:
        mfu = gflops / (peak_tflops * 1e3) if device == "cuda" else None
        return [name, path, f"{batch}x{tokens}", round(ours), round(bare),
                round(ours / bare, 2), round(gflops, 1), f"{gflops / limit_gflops:.0%}",
                f"{mfu:.1%}" if mfu is not None else "-"]  # fmt: skip

    with tempfile.TemporaryDirectory() as tmp:
        registry = CheckpointRegistry(Path(tmp) / "registry")
        root = register_base(registry, "b-0000", model_dir(name, Path(tmp)))
        for lora in (None, LoraSettings(r=8)):
            policy = load_policy(registry, root, new_lora=lora).to(device)
            kind = "lora r8" if lora else "full"
            params = sum(p.numel() for p in policy.model.parameters())
            if lora is None:
                print(f"{name}: {params:,} parameters", file=sys.stderr, flush=True)
                ours, bare = bench_generation(policy, batch, tokens)
                rows.append(row("generate", ours, bare, 2 * params * ours / 1e9))
                print(rows[-1], file=sys.stderr, flush=True)
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
            config = LearnerConfig(lr=1e-6, epochs=2, minibatches=2, micro_batch=batch)
            if device == "cuda":  # untimed, as the bare step's first: one-time GPU costs
                update(policy, batch_examples, config, accelerator)
            stats = update(policy, batch_examples, config, accelerator).stats
            # the learner also scores every example twice without gradients (pi_old, final KL)
            gflops = update_flops(params, batch_examples, config.epochs, lora is not None)
            gflops /= stats.seconds * 1e9
            rows.append(row(f"update {kind}", stats.tokens_per_s, bare, gflops))
            print(rows[-1], file=sys.stderr, flush=True)
            del policy
            if device == "cuda":
                torch.cuda.empty_cache()
    return rows


def versions() -> dict[str, str]:
    import accelerate
    import peft
    import transformers

    out = {"torch": torch.__version__, "transformers": transformers.__version__,
           "accelerate": accelerate.__version__, "peft": peft.__version__}  # fmt: skip
    if torch.cuda.is_available():
        out["gpu"] = torch.cuda.get_device_name()
        out["cuda"] = str(torch.version.cuda)
    return out


HEADER = ["model", "path", "batch", "tokens/s", "limit tokens/s", "ratio to its limit",
          "GFLOP/s", "of matmul peak", "MFU"]  # fmt: skip
KEYS = ["model", "path", "batch", "tokens_per_s", "limit_tokens_per_s", "ratio", "gflops",
        "of_matmul_peak", "mfu"]  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--models",
        default="tiny,smollm2-135m",
        help=f"comma-separated: tiny, smollm2-135m (the GGUF file), {RANDOM_SMOLLM2} "
        "(SmolLM2-135M's shape, random weights)",
    )
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
    limit, what = matmul_peak(args.device)
    print(f"compute limit: {what} at {limit:.1f} GFLOP/s")
    seen = versions()
    print(" ".join(f"{k} {v}" for k, v in seen.items()))
    for name in args.models.split(","):
        rows += bench_model(name, args.device, args.batch, args.tokens, args.peak_tflops, limit)
    print(format_table(HEADER, rows))
    write_results(
        "trainer",
        {
            "machine": machine(),
            "versions": seen,
            "device": args.device,
            "argv": sys.argv[1:],
            "matmul_peak_gflops": limit,
            "matmul_peak_measured": what,
            "peak_tflops": args.peak_tflops if args.device == "cuda" else None,
            "rows": [dict(zip(KEYS, r, strict=True)) for r in rows],
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
