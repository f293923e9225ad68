"""A rejected candidate judged again on more of its parent's held-out runs: what a gate that kept
a candidate pending and looked again would have read, from a finished `rtrl run` (its registry
and warehouse).

The gate judges each round's candidate once, on the parent's held-out runs so far, and a retry
is a new candidate trained on a wider window, judged at a stricter level. This reads the
parent's batches one by one (oldest first), scores their held-out runs under ``--candidate``,
and prints the gate's estimate and bound on the first one, two, ... batches' runs at a few
levels: whether the candidate's estimated gain holds as evidence grows, and where its bound
crosses 0. Scoring is SmolLM2 on the CPU: about two minutes for 72 agent runs.

    HF_HUB_OFFLINE=1 python bench/gate_more_evidence.py --run /tmp/agent-seeds8/seed-8 \\
        --candidate smollm2-0001
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import format_table, reexec_in_venv, write_results  # noqa: E402

reexec_in_venv(__file__)

LEVELS = (0.95, 0.9696, 0.99)


def main() -> int:
    from checkpoints.store import CheckpointRegistry
    from checkpoints.weights import load_policy
    from release.evidence import estimate_rows
    from release.offpolicy import evidence_rows
    from release.offpolicy_bound import WEIGHT_CAP
    from rewards.config import load_config
    from trainer.round_examples import read_round

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", type=Path, required=True, help="a finished `rtrl run`'s root")
    parser.add_argument("--candidate", required=True, help="the checkpoint to judge again")
    parser.add_argument("--held-out", type=float, default=0.5, help="the run's held-out share")
    parser.add_argument("--reward-config", default="agent", help="the run's reward (its range)")
    args = parser.parse_args()
    registry = CheckpointRegistry(args.run / "checkpoints")
    candidate = registry.get(args.candidate)
    parent = registry.get(candidate.parent or "")
    files = sorted((args.run / "warehouse" / "_batches" / "data").glob(
        f"b-{parent.checkpoint_id}-*.parquet"))  # fmt: skip
    policy = load_policy(registry, candidate)
    low, high = load_config(args.reward_config).reward_range()
    rows, table, figures = [], [], []
    for k, path in enumerate(files, start=1):
        held = read_round(parent, [(path.stem, [path])], args.held_out, candidate.org_id).held
        rows += evidence_rows(policy, held)
        bounds = []
        for level in LEVELS:
            e = estimate_rows(rows, level=level, resamples=0, seed=0, weight_cap=WEIGHT_CAP,
                              reward_min=low, reward_max=high)  # fmt: skip
            bounds.append(e.lower)
        figures.append({"batches": k, "n": e.n, "gain": e.gain, "ess": e.ess, "kl": e.kl,
                        "lower": dict(zip(map(str, LEVELS), bounds, strict=True))})  # fmt: skip
        table.append([k, e.n, f"{e.gain:+.3f}", *(f"{b:+.3f}" for b in bounds), f"{e.ess:.0f}"])
        print(format_table(["batches", "runs", "gain", *(f"bound {v:.2%}" for v in LEVELS),
                            "ESS"], table[-1:]), flush=True)  # fmt: skip
    print(f"{candidate.checkpoint_id} against {parent.checkpoint_id}:")
    print(format_table(["batches", "runs", "gain", *(f"bound {v:.2%}" for v in LEVELS), "ESS"],
                       table))  # fmt: skip
    results = {"candidate": candidate.checkpoint_id, "parent": parent.checkpoint_id,
               "looks": figures}  # fmt: skip
    write_results("gate_more_evidence", results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
