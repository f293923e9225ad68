#!/usr/bin/env python3
"""The agent world's outcomes as an events file, one interaction per outcome, for `rtrl
backfill` to compare two reward configurations over.

Each run is made by the world's own parts (``rtrl.worlds.agent_outcomes``): tools carried out
in a fresh repository, the hidden cases' grade, the user's rule and the plugin's events. The
outcome's name stands in each interaction's checkpoint id, so the backfill's per-checkpoint
table is a table per outcome. Then, for the table in bench/RESULTS.md:

    rtrl backfill --events bench/out/agent_outcomes.jsonl --old-config default --new-config agent
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import OUT, reexec_in_venv  # noqa: E402

reexec_in_venv(__file__)


def main() -> int:
    import orjson

    from agent.tasks import load_tasks
    from rtrl.worlds.agent_outcomes import EDITS, Outcome, all_outcome_events

    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--task", default=0, type=int, help="which easy task the runs are given")
    p.add_argument("--broken", nargs="+", type=int, default=[0, 1, 4],
                   help="broken calls per run")  # fmt: skip
    p.add_argument("--out", type=Path, default=OUT / "agent_outcomes.jsonl")
    args = p.parse_args()

    chosen = [Outcome(edit, k) for edit in EDITS for k in args.broken]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "wb") as out:
        for events in all_outcome_events(load_tasks("easy")[args.task], chosen):
            out.writelines(orjson.dumps(event) + b"\n" for event in events)
    print(f"{len(chosen)} outcomes -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
