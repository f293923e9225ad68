"""The trainer's subcommand, `rtrl train`.

Handlers import torch when they run, so ``rtrl --help`` stays fast.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from agent.tasks import GROUPS
from checkpoints.cli import add_publish, add_registry
from infra.cli import (
    add_watch_args,
    bootstrap_from,
    positive_int,
)
from models.devices import DEVICES
from trainer.exit_codes import EXIT_REJECTED
from trainer.learner_cli import add_learner_args, learner_from

log = logging.getLogger("rtrl.train")


def register(sub: argparse._SubParsersAction) -> None:
    t = sub.add_parser("train", help="one on-policy round: a checkpoint's new batches, an update, "
                       "the eval gate, a new checkpoint (promoted or rejected)",
                       description="Reads the batches the warehouse offered for --checkpoint "
                       "that no promoted checkpoint was trained on, trains it on them (PPO-clip "
                       "on its own rollouts and their behaviour log-probabilities; every weight, "
                       "or a LoRA adapter with --lora-r; a round killed midway resumes from its "
                       "last saved step), estimates the candidate's reward on "
                       "held-out interactions, reads the monitors' alarms of --checkpoint "
                       "against its parent, and registers the candidate with the gate's "
                       f"decision. Exit 0 promoted (or a canary), {EXIT_REJECTED} rejected, "
                       "1 when there is nothing to train on.")  # fmt: skip
    add_registry(t)
    t.add_argument(
        "--warehouse",
        type=Path,
        default=Path(".rtrl/warehouse"),
        help="local warehouse folder the batches' files are relative to",
    )
    t.add_argument(
        "--catalog",
        type=Path,
        default=None,
        help="the warehouse's DuckDB catalog, for the monitors (default: "
        "warehouse.duckdb in --warehouse)",
    )
    t.add_argument(
        "--checkpoint",
        default=None,
        help="the checkpoint whose data to train on (default: the current promoted)",
    )
    t.add_argument(
        "--id",
        default=None,
        help="the candidate's id (default: the parent's prefix and the next number)",
    )
    t.add_argument(
        "--device",
        choices=DEVICES,
        default="auto",
        help="auto: a CUDA GPU when there is one (bf16 autocast), else the CPU",
    )
    t.add_argument("--no-bf16", action="store_true", help="train in float32 on a GPU too")
    add_learner_args(t)
    t.add_argument(
        "--lora-r",
        type=positive_int,
        default=None,
        help="train a LoRA adapter of this rank instead of every weight (a "
        "checkpoint then stores only the adapter); a LoRA parent trains its own",
    )
    t.add_argument(
        "--lora-alpha",
        type=positive_int,
        default=16,
        help="LoRA scale numerator (scale = alpha / r)",
    )
    t.add_argument(
        "--lora-targets",
        default="q_proj,v_proj",
        help="comma-separated module names that get an adapter",
    )
    t.add_argument(
        "--held-out",
        type=float,
        default=0.3,
        help="share of interactions kept for the eval (default 0.3)",
    )
    t.add_argument(
        "--min-gain",
        type=float,
        default=0.0,
        help="margin the one-sided lower confidence bound of the candidate's "
        "estimated reward gain must exceed (default 0)",
    )
    t.add_argument(
        "--level", type=float, default=0.95, help="confidence level of that bound (default 0.95)"
    )
    t.add_argument(
        "--eval-prompts",
        type=int,
        default=64,
        help="held-out prompts the candidate and its parent generate for before it "
        "may serve, beside the shipped eval tasks (default 64; 0: no candidate evals)",
    )
    t.add_argument(
        "--eval-samples",
        type=int,
        default=4,
        help="generations per eval prompt and checkpoint (default 4)",
    )
    t.add_argument(
        "--eval-reader",
        default="harness",
        metavar="READER",
        help="how the candidate evals read a generation: harness (the agent harness over "
        "real text: code blocks, tool-call blocks, questions; the default), or a reader a "
        "simulator plugs in as module:factory (rtrl run's token-level users: "
        "rtrl.token_reader:simulated, rtrl.token_reader:simulated_agent)",
    )
    t.add_argument(
        "--eval-tasks",
        choices=GROUPS,
        default="shipped",
        help="the tasks (agent/tasks.toml) whose pass rate under their hidden tests the "
        "candidate must not lower, with the harness reader: shipped (the default), easy, or "
        "held_out (tasks no user asks, so never trained on)",
    )
    t.add_argument(
        "--eval-engine",
        choices=("transformers", "llama.cpp"),
        default="transformers",
        help="what samples the candidate evals of a LoRA candidate and its parent: "
        "transformers (the learner's own sampler; the default) or llama.cpp (a llama-server "
        "for each, on the GGUF files the gateway serves them from, `rtrl serve --engine "
        "llama.cpp`; several times faster on a CPU). Full-weights candidates use transformers",
    )
    t.add_argument(
        "--eval-engine-exact",
        action="store_true",
        help="llama.cpp: a quantized GGUF base as the learner computes it (as `rtrl serve "
        "--engine-exact`), so that the evals sample the learner's own weights",
    )
    t.add_argument(
        "--reward-config",
        type=Path,
        default=None,
        metavar="FILE",
        help="the reward configuration (JSON/TOML/YAML) the batches' rewards were computed "
        "under, as given to `rtrl stream worker --config`: the gate's bound shifts rewards by "
        "its range (default: reward v1's defaults, -4.1..2)",
    )
    t.add_argument(
        "--max-kl",
        type=float,
        default=1.0,
        help="largest KL from the served checkpoint (default 1.0)",
    )
    t.add_argument(
        "--thresholds",
        type=Path,
        default=None,
        help="monitor thresholds file (default: the built-in ones)",
    )
    t.add_argument(
        "--canary",
        type=float,
        default=None,
        metavar="PERCENT",
        help="a candidate that passes the gate serves this share of users first, as "
        "experiment canary-ID against its parent; `rtrl canary decide` rolls it out or "
        "back (default: promote at once)",
    )
    t.add_argument(
        "--canary-users",
        type=positive_int,
        default=100,
        help="users with a scored interaction, in each arm, before the canary's live reward "
        "is judged (default 100; at least 2)",
    )
    t.add_argument(
        "--canary-margin",
        type=float,
        default=0.1,
        help="the canary is rolled out when its live reward (per-user mean) is shown no more "
        "than this below the parent's (default 0.1)",
    )
    add_watch_args(t, "train whenever the served checkpoint has a new batch", 30.0)
    add_publish(t)  # the batches are read from the batches topic of the same cluster
    t.set_defaults(func=_train)


def _eval_engine(args: argparse.Namespace):  # EngineSettings | None
    if args.eval_engine != "llama.cpp":
        return None
    from llamacpp.cli import engine_settings

    return engine_settings(2, 16, exact=args.eval_engine_exact)


def _train(args: argparse.Namespace) -> int:
    import threading

    from infra.lifetime import stop_signals_call
    from infra.topics import TopicNames
    from models.loading import LoraSettings
    from release.canary import CanaryConfig
    from release.gate import GateConfig
    from rewards.config import RewardConfig, load_config
    from trainer.service import RoundOptions, train_once, watch

    if args.watch and (args.checkpoint or args.id):
        log.error(
            "--watch always trains the current promoted checkpoint: no --checkpoint or --id with it"
        )
        return 2
    try:
        reward = load_config(args.reward_config) if args.reward_config else RewardConfig()
        options = RoundOptions(
            registry=args.registry,
            warehouse=args.warehouse,
            bootstrap=bootstrap_from(args),
            topics=TopicNames(args.topic_prefix),
            learner=learner_from(args),
            device=args.device,
            bf16=not args.no_bf16,
            lora=None
            if args.lora_r is None
            else LoraSettings(
                r=args.lora_r,
                alpha=args.lora_alpha,
                targets=tuple(t for t in args.lora_targets.split(",") if t),
            ),
            gate=GateConfig.for_reward(
                reward,
                min_gain=args.min_gain,
                max_kl=args.max_kl,
                level=args.level,
                eval_prompts=args.eval_prompts,
                eval_samples=args.eval_samples,
                eval_reader=args.eval_reader,
                eval_tasks=args.eval_tasks,
            ),
            held_out=args.held_out,
            catalog=args.catalog,
            checkpoint=args.checkpoint,
            candidate_id=args.id,
            thresholds=args.thresholds,
            canary=None
            if args.canary is None
            else CanaryConfig(
                percent=args.canary, min_users=args.canary_users, margin=args.canary_margin
            ),
            publish=args.publish,
            eval_engine=_eval_engine(args),
        )
    except (ValueError, OSError) as exc:  # an option out of range, an unreadable config file
        log.error(
            "%s",
            str(exc).splitlines()[0]
            if "validation error" not in str(exc)
            else " ".join(str(exc).split()),
        )
        return 2
    if args.watch:
        stop = threading.Event()
        with stop_signals_call(lambda _signum, _frame: stop.set()):
            return watch(options, args.interval_s, stop)
    try:
        return train_once(options)
    except ValueError as exc:  # a taken id, batches without examples
        log.error("%s", exc)
        return 1
