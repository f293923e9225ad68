#!/usr/bin/env python3
"""The orgs world's convention on a checkpoint: how often its answers with code on the easy tasks
write prose before the code (``rtrl.worlds.org_world.has_preamble``), and how often they pass the
hidden tests with and without it, sampled by llama.cpp at the code world's sampling.

The base rate (SmolLM2-135M-Instruct, the shared checkpoint) is what makes the convention one a
model can be taught either way; after `rtrl run --world orgs`, the same prompts and seeds on
each organisation's last checkpoint show where its line moved it, on tasks sampled apart from
its users' (the world's users draw the same tasks, with other seeds).

    python bench/org_convention_rate.py --registry REG [--checkpoint ID ...] [--samples 16]

Without ``--registry``, SmolLM2 is registered in a temporary registry first. Figures to stdout
and ``bench/out/org_convention_rate.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def measure(registry, info, samples: int, seed: int, max_tokens: int | None = None) -> dict:
    """``samples`` answers per easy task from ``info``: answers, with code, with prose first,
    passing with and without it."""
    from agent.harness import Harness
    from agent.sandbox import grade
    from agent.tasks import load_tasks
    from llamacpp.cli import engine_settings
    from llamacpp.sampler import engine_sampler
    from release.task_evals import task_answers
    from rtrl.worlds.code_world import CodeWorldSettings
    from rtrl.worlds.org_world import has_preamble

    world = CodeWorldSettings() if max_tokens is None else CodeWorldSettings(max_tokens=max_tokens)
    tasks, params = load_tasks("easy"), world.sampling
    with engine_sampler(engine_settings(2, 16, exact=True), registry, info) as sampler:
        answers = task_answers(sampler, params, samples, seed, tasks)
    harness = Harness()
    out = {"answers": len(answers), "code": 0, "preamble": 0, "passed_preamble": 0,
           "passed_bare": 0}  # fmt: skip
    for i, text in enumerate(answers):
        code = harness.read(text).code()
        if not code:
            continue
        first = has_preamble(text)
        passed = grade(code, tasks[i // samples]).passed
        out["code"] += 1
        out["preamble"] += first
        out["passed_preamble" if first else "passed_bare"] += passed
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--registry", type=Path, help="a registry (default: SmolLM2 in a new one)")
    p.add_argument("--checkpoint", nargs="*", default=None,
                   help="checkpoints to measure (default: every one registered)")  # fmt: skip
    p.add_argument("--samples", type=int, default=16, help="answers per easy task")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--max-tokens", type=int, default=None,
                   help="an answer's token budget (default: the code world's)")  # fmt: skip
    args = p.parse_args()
    from checkpoints.store import CheckpointRegistry

    root = args.registry
    if root is None:
        root = Path(tempfile.mkdtemp()) / "checkpoints"
        from rtrl.cli import main as rtrl

        rtrl(["checkpoints", "init", "--registry", str(root), "--id", "smollm2-0000", "--model",
              "smollm2-135m"])  # fmt: skip
    registry = CheckpointRegistry(root)
    infos = [
        i for i in registry.list() if not args.checkpoint or i.checkpoint_id in args.checkpoint
    ]
    rows = {}
    print(f"{'checkpoint':<16} {'org':<8} {'answers':>7} {'code':>5} {'prose first':>11} "
          f"{'pass | prose':>12} {'pass | bare':>11}")  # fmt: skip
    for info in infos:
        r = measure(registry, info, args.samples, args.seed, args.max_tokens)
        rows[info.checkpoint_id] = {**r, "org": info.org_id, "status": info.status}
        first, bare = r["preamble"], r["code"] - r["preamble"]
        print(f"{info.checkpoint_id:<16} {info.org_id or 'shared':<8} {r['answers']:>7} "
              f"{r['code']:>5} {first / max(1, r['code']):>11.3f} "
              f"{r['passed_preamble'] / max(1, first):>12.3f} "
              f"{r['passed_bare'] / max(1, bare):>11.3f}")  # fmt: skip
    out = ROOT / "bench" / "out" / "org_convention_rate.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"samples": args.samples, "seed": args.seed,
                               "max_tokens": args.max_tokens, "rows": rows}, indent=2))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
