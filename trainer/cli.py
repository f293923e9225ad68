"""The trainer's subcommand, `rtrl train`.

Its options are derived from the round's settings, one per field (``infra.settings_cli``):
RoundOptions, LearnerConfig, LoraSettings, GateConfig and CanaryConfig, each declaring below the
fields the command gives itself instead and any option spelled otherwise than its field.
Handlers import torch when they run, so ``rtrl --help`` stays fast.
"""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path

from checkpoints.cli import add_publish, add_registry
from infra.cli import add_watch_args, bootstrap_from, positive_int
from infra.settings_cli import Option, SettingsOptions
from infra.topics import TopicNames
from models.devices import DEVICES
from models.lora_settings import LoraSettings
from release.canary_config import CanaryConfig
from release.gate import GateConfig
from trainer.exit_codes import EXIT_REJECTED, EXIT_WAITING
from trainer.learner_cli import add_learner_args, learner_from
from trainer.round_options import RoundOptions

log = logging.getLogger("rtrl.train")

# The round's own options (its help on the fields); given by the command: the registry and
# Kafka options (checkpoints.cli), the settings objects below, and the evals' llama.cpp.
ROUND_OPTIONS = SettingsOptions(
    RoundOptions,
    options={
        "warehouse": Option(default=Path(".rtrl/warehouse")),
        "candidate_id": Option(flags=("--id",)),
        "device": Option(choices=DEVICES),
        "own_only": Option(type=str, from_field=",".join, metavar="ORG,...",
                           to_field=lambda text: tuple(t for t in text.split(",") if t)),
    },
    omit=("registry", "bootstrap", "topics", "learner", "gate", "publish", "lora", "canary",
          "eval_engine"),
)  # fmt: skip
# --lora-r is the switch: none, no adapter (every weight trains).
LORA_OPTIONS = SettingsOptions(
    LoraSettings,
    prefix="lora_",
    options={
        "r": Option(type=positive_int, default=None,
                    help="train a LoRA adapter of this rank instead of every weight (a "
                    "checkpoint then stores only the adapter); a LoRA parent trains its own"),
        "alpha": Option(type=positive_int),
        "targets": Option(type=str, from_field=",".join,
                          to_field=lambda text: tuple(t for t in text.split(",") if t),
                          help="comma-separated module names that get an adapter"),
    },
    omit=("dropout",),
)  # fmt: skip
# The gate's limits the command sets; the reward's range comes from --reward-config.
GATE_OPTIONS = SettingsOptions(
    GateConfig,
    options={
        "min_gain": "margin the one-sided lower confidence bound of the candidate's "
        "estimated reward gain must exceed",
        "max_kl": "largest KL from the served checkpoint",
        "level": "confidence level of that bound",
        "eval_prompts": "held-out prompts the candidate and its parent generate for before it "
        "may serve, beside the shipped eval tasks (0: no candidate evals)",
        "eval_samples": "generations per eval prompt and checkpoint",
        "eval_reader": Option(metavar="READER",
                              help="how the candidate evals read a generation: harness (the "
                              "agent harness over real text: code blocks, tool-call blocks, "
                              "questions; the default), or a reader a simulator plugs in as "
                              "module:factory (rtrl run's token-level users: "
                              "rtrl.token_reader:simulated, rtrl.token_reader:simulated_agent)"),
        "eval_tasks": "the tasks (agent/tasks.toml) whose pass rate under their hidden tests "
        "the candidate must not lower, with the harness reader: shipped (the default), easy, or "
        "held_out (tasks no user asks, so never trained on)",
        "tool_opening": "before the candidate serves, score its probability of opening each "
        "agent task's first answer with a tool call against its parent's: a fall past "
        "release.tool_opening's limits blocks it as tool avoidance (the agent world's runs)",
        "min_examples": Option(flags=("--gate-min-examples",), type=positive_int,
                               help="held-out runs with a reward the gate needs to judge at all "
                               "(fewer: the candidate is rejected for it)"),
        "min_users": Option(flags=("--gate-min-users",), type=positive_int,
                            help="held-out users, the bound's independent units, the gate needs "
                            "to judge at all (its CR2 bound with the Bell-McCaffrey t holds its "
                            "level down to 6-8 users: bench/RESULTS.md, gate calibration)"),
    },
    omit=("min_ess_fraction", "block_on_alarms", "resamples",
          "weight_cap", "reward_min", "reward_max", "eval_alpha"),
)  # fmt: skip
# --canary is the switch: none, the candidate is promoted at once.
CANARY_OPTIONS = SettingsOptions(
    CanaryConfig,
    prefix="canary_",
    options={
        "percent": Option(flags=("--canary",), default=None, metavar="PERCENT",
                          help="a candidate that passes the gate serves this share of users "
                          "first, as experiment canary-ID against its parent; `rtrl canary "
                          "decide` rolls it out or back (default: promote at once)"),
        "min_users": Option(flags=("--canary-users",), type=positive_int,
                            help="users with a scored interaction in each arm, at least 2, "
                            "before the canary's live reward is judged"),
        "margin": "the canary is rolled out when its live reward (mean reward per scored "
        "interaction, its excess censored share counted at the reward's minimum) is shown no "
        "more than this below the parent's",
        "min_exposure_hours": "no rollout before the canary has served this long (a weekly "
        "cycle: users who come on other days, or less often, are seen)",
        "user_window_hours": "each user's outcome is taken over this window after their first "
        "exposure and counts once it closes (0: every interaction landed so far)",
    },
    omit=("alpha", "guardrail_alpha", "guardrails", "tuning_users", "srm_alpha",
          "deadline_hours", "max_crossed_share", "reward_min", "strata", "min_stratum_users"),
)  # fmt: skip


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
                       "1 when there is nothing to train on, "
                       f"{EXIT_WAITING} when the new batches' held-out evidence is below the "
                       "gate's minimums (they wait for the next batches).")  # fmt: skip
    add_registry(t)
    ROUND_OPTIONS.add_to(t)
    add_learner_args(t)
    LORA_OPTIONS.add_to(t)
    GATE_OPTIONS.add_to(t)
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
        "--eval-engine-threads",
        type=positive_int,
        default=None,
        metavar="N",
        help="llama.cpp: CPU threads of the evals' llama-server (default: half the machine's "
        "cores, at least 1): llama.cpp's threads meet at a barrier after every "
        "operation, so a server with more threads than the cores it gets beside the gateway's "
        "engine decodes at a fraction of its speed (0.6-0.8 tokens/s at 2 threads on 2 shared "
        "cores, 9-11 at 1)",
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
    CANARY_OPTIONS.add_to(t)
    add_watch_args(t, "train whenever the served checkpoint has a new batch", 30.0)
    t.add_argument(
        "--metrics-port",
        type=int,
        default=None,
        metavar="PORT",
        help="with --watch: Prometheus metrics on this port (/metrics): the service's phase "
        "(idle, waiting for evidence, training, stopping), a waiting round's evidence against "
        "the gate's minimums, rounds by outcome (trainer/metrics.py)",
    )
    add_publish(t)  # the batches are read from the batches topic of the same cluster
    t.set_defaults(func=_train)


def _eval_engine(args: argparse.Namespace):  # EngineSettings | None
    if args.eval_engine != "llama.cpp":
        return None
    from llamacpp.cli import engine_settings

    threads = args.eval_engine_threads or max(1, (os.cpu_count() or 2) // 2)
    return engine_settings(threads, 16, exact=args.eval_engine_exact)


def round_options(args: argparse.Namespace) -> RoundOptions:
    """The round's settings: its options', and what the command gives itself (ValueError,
    OSError: an option out of range, an unreadable reward configuration)."""
    from rewards.config import RewardConfig, load_config

    reward = load_config(args.reward_config) if args.reward_config else RewardConfig()
    return ROUND_OPTIONS.read(
        args,
        registry=args.registry,
        bootstrap=bootstrap_from(args),
        topics=TopicNames(args.topic_prefix),
        learner=learner_from(args),
        gate=GateConfig.for_reward(reward, **GATE_OPTIONS.values(args)),
        publish=args.publish,
        lora=None if args.lora_r is None else LORA_OPTIONS.read(args),
        canary=None
        if args.canary_percent is None
        else CANARY_OPTIONS.read(args, reward_min=reward.reward_range()[0]),
        eval_engine=_eval_engine(args),
    )


def _train(args: argparse.Namespace) -> int:
    import threading

    from infra.lifetime import stop_signals_call
    from trainer.service import train_once, watch

    if args.watch and (args.checkpoint or args.candidate_id):
        log.error(
            "--watch always trains the current promoted checkpoint: no --checkpoint or --id with it"
        )
        return 2
    try:
        options = round_options(args)
    except (ValueError, OSError) as exc:  # an option out of range, an unreadable config file
        log.error(
            "%s",
            str(exc).splitlines()[0]
            if "validation error" not in str(exc)
            else " ".join(str(exc).split()),
        )
        return 2
    if args.watch:
        from trainer.metrics import TrainerMetrics

        stop, metrics = threading.Event(), TrainerMetrics()
        server = metrics.serve(args.metrics_port) if args.metrics_port is not None else None
        try:
            with stop_signals_call(lambda _signum, _frame: stop.set()):
                return watch(options, args.interval_s, stop, metrics)
        finally:
            if server is not None:
                server.shutdown()
    try:
        return train_once(options)
    except ValueError as exc:  # a taken id, batches without examples
        log.error("%s", exc)
        return 1
