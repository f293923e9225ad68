#!/usr/bin/env python3
"""The soak of the production topology, long: `rtrl up` (every service a process of its own
under supervisord) with steady simulated traffic (`rtrl simulate`'s users, the code world's
tasks), while the trainer is killed, the sink killed, the broker stopped, the gateway's
llama-server killed (llama.cpp), the machine starved by a CPU hog; then
the invariants the short test holds (``tests/rtrl/test_soak.py``) and the figures: when each
promoted checkpoint first served (seconds from the first traffic), the rounds by outcome,
requests answered, failed and refused (with a reason: overloaded) across each fault, events
accepted and landed, and each service's CPU seconds (its process and its children, over its
restarts, sampled every 5 s).

    python bench/soak.py [--model smollm2-135m --engine llama.cpp] [--traffic-min 30]
                         [--rate 6] [--threads 4] [--gate-min-runs 8 --gate-min-users 3]
                         [--train-args '...'] [--root /tmp/rtrl-soak] [--open-gate]

The limits it prints beside its figures are the issue's: no broken invariant, no failed
request, every answered interaction recorded. Figures to stdout and ``bench/out/soak.json``.
A Ctrl-C ends the traffic early, waits up to 3 minutes for the records of what ran, and stops
the topology in order; the figures are still written (``stopped_early``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT.parent))
from _common import format_table, machine, reexec_in_venv, write_results  # noqa: E402

reexec_in_venv(__file__)

from rtrl.up_plan import CPU_TRAIN_ARGS  # noqa: E402
from tests.support.soak import TINY_TRAIN_ARGS, Soak, SoakPlan  # noqa: E402

OPEN_GATE = "--min-gain -1000 --gate-min-examples 4 --gate-min-users 2"


def _stop_early(soak: Soak) -> None:
    """The first Ctrl-C: the traffic ends, no further fault begins, the records of what ran are
    waited for, the topology is stopped in order and the figures are written; a second one
    interrupts the wait and stops the topology at once."""
    print("stopping early: the traffic ends, its records are waited for (at most 3 minutes), "
          "then every service stops (Ctrl-C again to stop at once)",
          file=sys.stderr, flush=True)  # fmt: skip
    soak.stopping.set()
    signal.signal(signal.SIGINT, signal.default_int_handler)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="tiny")
    p.add_argument("--engine", default="transformers", choices=("transformers", "llama.cpp"))
    p.add_argument("--traffic-min", type=float, default=10.0)
    p.add_argument("--rate", type=float, default=20.0, help="interactions a minute")
    p.add_argument("--users", type=int, default=24)
    p.add_argument(
        "--threads",
        type=int,
        default=4,
        help="the users' asks in flight at once (an arrival past them is shed)",
    )
    p.add_argument("--max-tokens", type=int, default=16)
    p.add_argument("--min-rows", type=int, default=8, help="[batches] min_rows")
    p.add_argument(
        "--gate-min-runs",
        type=int,
        default=8,
        help="held-out runs a round waits for and the gate needs",
    )
    p.add_argument(
        "--gate-min-users",
        type=int,
        default=3,
        help="held-out users a round waits for and the gate needs",
    )
    p.add_argument(
        "--train-args",
        default=None,
        help="`rtrl train` options (default: the tiny model's recipe, or "
        "`rtrl up`'s CPU recipe for any other model)",
    )
    p.add_argument("--root", type=Path, default=Path("/tmp/rtrl-soak"))
    p.add_argument("--open-gate", action="store_true",
                   help="promote whatever trains (the gate's margin -1000, minimums 4 runs "
                   "and 2 users): the swaps under load and the time to a checkpoint serving "
                   "are measured, not learning (the tiny model's code is noise)")  # fmt: skip
    args = p.parse_args()
    minutes = args.traffic_min * 60
    faults: list[tuple[float, str, float]] = [
        (0.15 * minutes, "kill the trainer", 0.0),
        (0.3 * minutes, "kill the sink", 0.0),
        (0.45 * minutes, "stop the broker", 30.0),
        (0.65 * minutes, "starve the machine", 60.0),
    ]
    if args.engine == "llama.cpp":  # the transformers engine serves in the gateway's process
        faults.append((0.55 * minutes, "kill the gateway's llama-server", 0.0))
    train_args = args.train_args or (
        TINY_TRAIN_ARGS if args.model == "tiny" else " ".join(CPU_TRAIN_ARGS)
    )
    if args.open_gate:
        train_args += " " + OPEN_GATE
    plan = SoakPlan(model=args.model, engine=args.engine, traffic_s=minutes,
                    rate_per_min=args.rate, users=args.users, threads=args.threads,
                    max_tokens=args.max_tokens, train_args=train_args, faults=tuple(sorted(faults)),
                    window_s=60, late_s=60, check_every_s=15.0, min_rows=args.min_rows,
                    gate_min_examples=args.gate_min_runs,
                    gate_min_users=args.gate_min_users)  # fmt: skip
    shutil.rmtree(args.root, ignore_errors=True)
    args.root.mkdir(parents=True)
    soak = Soak(args.root, plan)
    started = time.monotonic()
    signal.signal(signal.SIGINT, lambda *_: _stop_early(soak))
    try:
        soak.start()
        soak.run_traffic()
        # stopped early: the records of what ran are still waited for, less long
        landed_s = soak.wait_for_records(timeout_s=180 if soak.stopping.is_set() else 600)
    finally:
        code = soak.stop()
    figures = soak.invariants()  # after every service flushed what it held at the stop
    figures["records_landed_after_s"] = landed_s
    figures["stop_exit"] = code
    figures["wall_s"] = round(time.monotonic() - started, 1)
    figures["stopped_early"] = soak.stopping.is_set()
    trainer_log = (soak.data / "logs" / "trainer.log").read_text()
    figures["rounds_given_up"] = trainer_log.count("given up")
    figures["plan"] = {"model": args.model, "engine": args.engine, "traffic_min": args.traffic_min,
                       "rate_per_min": args.rate, "users": args.users,
                       "threads": args.threads, "train_args": train_args,
                       "gate_min_runs": args.gate_min_runs,
                       "gate_min_users": args.gate_min_users,
                       "open_gate": args.open_gate}  # fmt: skip
    figures["machine"] = machine()
    print(format_table(["fault", "at (s)", "lasted (s)", "answered", "failed", "refused"],
                       [[f["what"], f["at_s"], f["lasted_s"], f["answered"], f["failed"],
                         f["refused"]] for f in figures["faults"]]))  # fmt: skip
    print(format_table(["checkpoint", "parent", "status", "first served (s)"],
                       [[c["id"], c["parent"] or "-", c["status"],
                         figures["served_since_s"].get(c["id"], "-")]
                        for c in figures["checkpoints"]]))  # fmt: skip
    print(format_table(["service", "CPU s", "share"],
                       [[k, v, f"{v / max(sum(figures['cpu_s'].values()), 1e-9):.0%}"]
                        for k, v in figures["cpu_s"].items()]))  # fmt: skip
    print(f"events accepted {figures['events_accepted']}, archived {figures['events_archived']}"
          f" (limit: equal), late {figures['events_late']}; interactions answered "
          f"{figures['interactions_answered']}, recorded {figures['interactions_recorded']} "
          f"(limit: equal); requests failed {figures['requests_failed'] or 0} (limit 0), "
          f"refused with a reason {figures['requests_refused'] or 0}; "
          f"broken invariants {figures['broken'] or 'none'} (limit none); wall "
          f"{figures['wall_s']} s")  # fmt: skip
    path = write_results("soak", figures)
    print(f"written {path}")
    print(json.dumps({"broken": figures["broken"]}))
    return 0 if not figures["broken"] else 1


if __name__ == "__main__":
    sys.exit(main())
