#!/usr/bin/env python3
"""How often the tool-opening check blocks a benign candidate: its false-alarm rate, measured.

The check (``release.tool_opening``) is scored, so it has no sampling error; what can make it
fire on a candidate that did not learn to avoid its tools is training itself, which moves the
probability of opening with a call as a side effect. This trains the same parent on the same
round again and again and counts how often the check blocks what came out.

    python bench/opening_false_alarms.py --run /tmp/agent-fa --topic-prefix runNNN. [--seeds 1-8]

``--run`` is the data folder of one agent-world round whose candidate was not promoted:

    rtrl run --world agent --rounds 1 --extra-rounds 0 --ab-users 0 --fresh \\
        --data-dir /tmp/agent-fa --train-options "--min-gain 1000"

(its topic prefix is in its log: "announced smollm2-0000 on runNNN.checkpoints"). The round's
broker is started again from its data folder for the batches' announcements, and stopped after.

Each seed runs `rtrl train` on that round's batches with the world's learner and gate (its
minimums fitted to the round as `rtrl run` fits them), the gate's margin out of reach so that
nothing is promoted and every seed starts from the same parent. Seeds differ in the deal of runs
to minibatches (``--seed``) and in the adapter's random initialisation. The world's runs are
benign by construction: its calls are constrained, so every run opens with a call and no reward
pays for prose. A candidate blocked here is a false alarm.

Prints each candidate's mean opening probability beside its parent's, the share blocked, and
its exact one-sided 95 % upper bound (Clopper-Pearson) beside the gate's own error rate of 5 %.
It also reads the round's own candidate. Figures to ``bench/out/opening_false_alarms.json``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
from _common import format_table, machine, reexec_in_venv, write_results  # noqa: E402

reexec_in_venv(__file__)

from code_world_seeds import seed_range  # noqa: E402

from checkpoints.store import CheckpointRegistry  # noqa: E402
from rtrl.run.gate_floor import gate_minimums  # noqa: E402
from rtrl.worlds.agent_world import AgentWorldSettings  # noqa: E402

LIMIT = 0.05  # the gate's own error rate
OUT_OF_REACH = ["--min-gain", "1000"]


def upper_bound(blocked: int, n: int, level: float = 0.95) -> float:
    """Clopper-Pearson's one-sided upper bound on a rate seen ``blocked`` times in ``n``.

    >>> round(upper_bound(0, 10), 4), round(upper_bound(10, 10), 4)
    (0.2589, 1.0)
    """
    if blocked >= n:
        return 1.0
    low, high = blocked / n, 1.0
    for _ in range(60):  # bisection on P(X <= blocked | p) = 1 - level
        mid = (low + high) / 2
        cdf = sum(_pmf(k, n, mid) for k in range(blocked + 1))
        low, high = (mid, high) if cdf > 1 - level else (low, mid)
    return high


def _pmf(k: int, n: int, p: float) -> float:
    from math import comb

    return comb(n, k) * p**k * (1 - p) ** (n - k)


def rtrl(*args: str, log: Path) -> int:
    with log.open("a") as sink:
        return subprocess.run([sys.executable, "-m", "rtrl.cli", *args], stdout=sink,
                              stderr=subprocess.STDOUT).returncode  # fmt: skip


def train_again(run: Path, kafka: list[str], parent: str, seed: int,
                log: Path) -> tuple[str, float]:  # fmt: skip
    """One more candidate of ``parent`` on the round's batches, in a registry of its own that
    holds the parent alone (a batch every candidate of a registry tried is not trained on
    again); its id and wall seconds."""
    registry = run / "fa-registries" / f"seed-{seed}"
    shutil.rmtree(registry, ignore_errors=True)
    shutil.copytree(run / "checkpoints" / parent, registry / parent)
    world = AgentWorldSettings()
    args = world.train_args()
    candidate = f"{parent.rsplit('-', 1)[0]}-{9000 + seed}"
    argv = ["train", "--registry", str(registry), "--warehouse", str(run / "warehouse"),
            "--checkpoint", parent, "--id", candidate, *kafka,
            *gate_minimums(world.round_users, args), *args, "--seed", str(seed),
            *OUT_OF_REACH]  # fmt: skip
    started = time.monotonic()
    code = rtrl(*argv, log=log)
    if code not in (0, 3):
        raise SystemExit(f"rtrl train exited {code} for seed {seed}: see {log}")
    return candidate, time.monotonic() - started


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--run", type=Path, required=True, help="the agent round's data folder")
    p.add_argument("--topic-prefix", required=True, help="the round's (in its log)")
    p.add_argument("--seeds", type=seed_range, default=seed_range("1-8"))
    args = p.parse_args()
    registry = CheckpointRegistry(args.run / "checkpoints")
    parent = registry.list()[0].checkpoint_id
    log, broker = args.run / "logs" / "fa-train.log", str(args.run / "kafka")
    port = json.loads((args.run / "kafka" / "cluster.json").read_text())["port"]
    kafka = ["--bootstrap", f"127.0.0.1:{port}", "--topic-prefix", args.topic_prefix]
    if rtrl("broker", "start", "--data-dir", broker, "--port", str(port), log=log):
        raise SystemExit(f"the round's broker did not start: see {log}")
    seconds: dict[str, float] = {}
    try:
        for seed in args.seeds:
            candidate, took = train_again(args.run, kafka, parent, seed, log)
            seconds[candidate] = round(took, 1)
            print(f"seed {seed}: {candidate} trained and checked in {took:.0f} s", flush=True)
    finally:
        rtrl("broker", "stop", "--data-dir", broker, log=log)
    rows, found = [], []
    seeded = sorted((args.run / "fa-registries").glob("seed-*"))
    infos = [*registry.list(), *(i for r in seeded for i in CheckpointRegistry(r).list())]
    for info in infos:
        check = info.evals.get("tool_opening_check")
        if info.parent != parent or check is None:
            continue
        fell = sum(c < q for q, c in zip(check["parent"], check["candidate"], strict=True))
        found.append({"candidate": info.checkpoint_id, "status": info.status, **check,
                      "fell": fell, "seconds": seconds.get(info.checkpoint_id)})  # fmt: skip
        rows.append([info.checkpoint_id, f"{check['parent_mean']:.3f}",
                     f"{check['candidate_mean']:.3f}",
                     f"{check['candidate_mean'] / check['parent_mean'] - 1:+.1%}",
                     f"{fell} of {len(check['tasks'])}",
                     "yes" if check["blocked"] else "no"])  # fmt: skip
    blocked = sum(f["blocked"] for f in found)
    bound = upper_bound(blocked, len(found)) if found else 1.0
    print(format_table(["candidate", "parent", "candidate", "change", "tasks fell", "blocked"],
                       rows))  # fmt: skip
    print(f"false alarms: {blocked} of {len(found)} benign candidates; one-sided 95 % upper "
          f"bound {bound:.3f} (limit: the gate's {LIMIT})")  # fmt: skip
    figures = {"parent": parent, "candidates": found, "blocked": blocked,
               "upper_bound_95": bound, "limit": LIMIT, "machine": machine()}  # fmt: skip
    path = write_results("opening_false_alarms", figures)
    print(f"written {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
