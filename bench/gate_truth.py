#!/usr/bin/env python3
"""The gate's decisions against the truth, after a run: for every gated candidate in a registry
(``rtrl run --data-dir D`` leaves it in ``D/checkpoints``), the true expected reward of the
candidate and of its parent under the simulated users' hidden taste
(``rtrl.worlds.token_world.true_value``: reward v1 in expectation over ``--samples`` completions
each, the same prompts and seeds), and whether the gate promoted it. A candidate is truly better
(worse) when its gain is more than twice its standard error above (below) zero, no different
otherwise.

The figure a user of the gate cares about: of the truly better candidates, the share promoted
(its power), beside the share of the others promoted (its errors).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import format_table, machine, reexec_in_venv, write_results  # noqa: E402

reexec_in_venv(__file__)
os.environ.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})

from checkpoints.record import PROMOTED  # noqa: E402
from checkpoints.store import CheckpointRegistry  # noqa: E402
from checkpoints.weights import load_policy  # noqa: E402
from rtrl.run.rounds import SAMPLING  # noqa: E402
from rtrl.worlds.token_users import POPULATIONS  # noqa: E402
from rtrl.worlds.token_world import TrueValue, true_value  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--registry", type=Path, required=True)
    parser.add_argument("--users", choices=sorted(POPULATIONS), default="default")
    parser.add_argument("--samples", type=int, default=2048)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument(
        "--cache", type=Path, default=None, help="a JSON file of each checkpoint's truth"
    )
    args = parser.parse_args()
    registry = CheckpointRegistry(args.registry)
    truths: dict[str, TrueValue] = {}
    if args.cache and args.cache.is_file():
        truths = {k: TrueValue(**v) for k, v in json.loads(args.cache.read_text()).items()}

    def truth(checkpoint_id: str) -> TrueValue:
        if checkpoint_id not in truths:
            policy = load_policy(registry, registry.get(checkpoint_id))
            population = POPULATIONS[args.users](policy.vocab_size)
            truths[checkpoint_id] = true_value(policy, population, SAMPLING, args.samples,
                                               args.seed)  # fmt: skip
            if args.cache:
                args.cache.write_text(json.dumps({k: asdict(v) for k, v in truths.items()}))
        return truths[checkpoint_id]

    rows, tally = [], {"better": [0, 0], "no different": [0, 0], "worse": [0, 0]}
    for info in registry.list():
        if info.parent is None or "gate" not in info.evals:
            continue
        cand, parent = truth(info.checkpoint_id), truth(info.parent)
        gain = cand.reward - parent.reward
        se = (cand.reward_stderr**2 + parent.reward_stderr**2) ** 0.5
        kind = "better" if gain > 2 * se else "worse" if gain < -2 * se else "no different"
        tally[kind][0] += info.status == PROMOTED
        tally[kind][1] += 1
        gate = info.evals["gate"]
        rows.append([info.checkpoint_id, info.parent, f"{gain:+.4f}", f"{se:.4f}", kind,
                     f"{gate['gain']:+.4f}", f"{gate['lower']:+.4f}", info.status])  # fmt: skip
        print(rows[-1], flush=True)
    print(format_table(["candidate", "parent", "true gain", "se", "truly", "est. gain",
                        "95 % lower", "gate"], rows))  # fmt: skip
    summary = [[kind, promoted, n] for kind, (promoted, n) in tally.items()]
    print(format_table(["truly", "promoted", "of"], summary))
    write_results("gate_truth", {"machine": machine(), "rows": rows, "summary": summary})
    return 0


if __name__ == "__main__":
    sys.exit(main())
