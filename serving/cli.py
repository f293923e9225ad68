"""`rtrl serve`: the OpenAI-compatible gateway (``serving``). Only this handler reads the
environment (the upstream's API key, the bootstrap); the gateway itself gets a ServeConfig.

The options are the settings' fields (``infra.settings_cli``): ServeConfig's, the gateway's
(GatewayConfig) and, with ``--engine llama.cpp``, the llama.cpp servers' (``--engine-*``,
``llamacpp.cli``); the few whose spelling or unit is older than their field say so below.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from infra.api_keys import DEFAULT_KEY_DB
from infra.cli import add_bootstrap_arg, add_topic_prefix_arg, bootstrap_from, positive_int
from infra.settings_cli import Option, SettingsOptions, add_command
from llamacpp.cli import add_engine_args, engine_settings_from
from llamacpp.engine_settings import EngineSettings
from serving.completions import GatewayConfig
from serving.serve_config import UPSTREAM_KEY_ENV, ServeConfig

DEFAULT_REGISTRY = ".rtrl/checkpoints"

# Given by the command itself: the Kafka options (infra.cli), the upstream's key (environment),
# the llama.cpp engine, the experiment's split (--experiment, --arms, --canary) and the
# gateway's settings (GATEWAY_OPTIONS); drain_s is no option.
SERVE_OPTIONS = SettingsOptions(
    ServeConfig,
    options={
        "registry": Option(default=Path(DEFAULT_REGISTRY)),
        "checkpoint": Option(default=None),
        "key_db": Option(flags=("--key-db",), old_flags=("--db",), default=DEFAULT_KEY_DB),
        "upstream": Option(metavar="URL"),
        "max_batch": Option(type=positive_int),
        "spool_max": Option(type=positive_int),
        "spool_max_bytes": Option(type=positive_int),
        "batch_wait_s": Option(
            flags=("--batch-wait-ms",),
            from_field=lambda s: s * 1000,
            to_field=lambda ms: ms / 1000,
            help="local backend: how long a batch waits for more requests, in milliseconds "
            "(0: it takes those already queued)",
        ),
    },
    omit=(
        "bootstrap",
        "topic_prefix",
        "upstream_api_key",
        "engine",
        "split",
        "split_org",
        "gateway",
        "drain_s",
    ),
)
GATEWAY_OPTIONS = SettingsOptions(
    GatewayConfig,
    options={
        "default_max_tokens": Option(
            flags=("--max-tokens",),
            type=positive_int,
            help="completion tokens when a request does not say",
        ),
        "hide_logprobs": "never show log-probabilities to callers, as some hosted APIs do (they "
        "are still recorded)",
        "model_names": Option(
            flags=("--served-model-name",),
            type=str,
            nargs="+",
            metavar="NAME",
            from_field=list,
            to_field=tuple,
            help="names a request may give as its model for the checkpoint this gateway serves, "
            "besides the checkpoint ids of /v1/models; any other is a 404",
        ),
        "answer_deadline_s": "a request not answered within this many seconds is refused "
        "with a 504 `deadline_exceeded` and Retry-After, its generation cancelled; set it under "
        "your clients' timeout, past which a request fails with no reason given (0: none)",
    },
    omit=("remember_answers", "remember_s"),  # agents' answer memory: not options (yet)
)


def register(sub: argparse._SubParsersAction) -> None:
    s = add_command(
        sub,
        "serve",
        _serve,
        SERVE_OPTIONS,
        help="an OpenAI-compatible server that records every completion as a rollout",
        description="POST /v1/chat/completions and /v1/completions (stream and logprobs "
        "included), GET /v1/models, /livez, /readyz, /openapi.json; API keys as the collector's "
        "(Authorization: Bearer). Every completion goes to the rollouts topic with its token ids "
        "and behaviour log-probabilities (X-Rtrl-Privacy-Mode: true: never recorded); the "
        "answer says X-Rtrl-Interaction-Id, X-Rtrl-Checkpoint-Id and X-Rtrl-Experiment. "
        "Follows the checkpoints topic and moves to each newly promoted checkpoint.",
    )
    add_bootstrap_arg(s)
    add_topic_prefix_arg(s)
    s.add_argument(
        "--engine",
        choices=("llama.cpp",),
        default=None,
        help="serve through llama.cpp's server (built once into the cache; CPU inference), "
        "started here on the served checkpoint: a GGUF base as it is, a LoRA checkpoint as a "
        "GGUF adapter over its base, full weights as a GGUF model (converted once by "
        "llama.cpp's own converters, cached). Each newly promoted checkpoint gets a server of "
        "its own; requests admitted before the switch finish on the old one, which is then "
        "stopped, so no answer mixes checkpoints. The gateway records its rollouts as for any "
        "upstream",
    )
    add_engine_args(s)
    GATEWAY_OPTIONS.add_to(s)
    s.add_argument("--experiment", default=None, help="A/B experiment name (with --arms)")
    s.add_argument(
        "--arms",
        default=None,
        metavar="A=CKPT:W,B=CKPT:W",
        help="the experiment's arms: name=checkpoint:weight (checkpoint 'current' is "
        "the followed one); a user (X-Rtrl-User-Id) always lands in the same arm",
    )
    s.add_argument(
        "--experiment-org",
        default=None,
        metavar="ORG",
        help="the experiment (--experiment/--arms) splits this organisation's users alone; "
        "every other one is served as without it (default: every organisation's users)",
    )
    s.add_argument(
        "--canary",
        default=None,
        metavar="CKPT:PERCENT",
        help="serve CKPT to PERCENT of users against the followed checkpoint, as "
        "experiment canary-CKPT (arms parent and canary)",
    )


def _split(args: argparse.Namespace):  # -> Split | None
    from serving.routing import canary, parse_arms

    if args.canary and (args.experiment or args.arms):
        raise ValueError("--canary is an experiment of its own: not with --experiment/--arms")
    if args.canary:
        ckpt, _, percent = args.canary.rpartition(":")
        return canary(ckpt, float(percent))
    if bool(args.experiment) != bool(args.arms):
        raise ValueError("--experiment and --arms come together")
    return parse_arms(args.experiment, args.arms) if args.experiment else None


def _split_org(args: argparse.Namespace) -> str | None:
    if args.experiment_org is not None and not args.experiment:
        raise ValueError("--experiment-org names whose users --experiment/--arms split")
    return args.experiment_org


def _serve(args: argparse.Namespace) -> int:
    engine = None
    if args.engine is not None:
        try:
            if args.upstream is not None:
                raise ValueError("--engine starts its own upstream: not with --upstream")
            engine = engine_settings_from(args)
        except (ValueError, RuntimeError) as exc:
            print(f"rtrl serve: {exc}", file=sys.stderr)
            return 2
    return _run(args, engine)


def serve_config(args: argparse.Namespace, engine: EngineSettings | None = None) -> ServeConfig:
    """The gateway's settings: its options', and what the command gives itself."""
    return SERVE_OPTIONS.read(
        args,
        bootstrap=bootstrap_from(args),
        topic_prefix=args.topic_prefix,
        upstream_api_key=os.environ.get(UPSTREAM_KEY_ENV),
        engine=engine,
        split=_split(args),
        split_org=_split_org(args),
        gateway=GATEWAY_OPTIONS.read(args),
    )


def _run(args: argparse.Namespace, engine: EngineSettings | None = None) -> int:
    from serving.server import run

    try:
        return run(serve_config(args, engine))
    except (ValueError, KeyError, RuntimeError) as exc:
        print(f"rtrl serve: {exc}", file=sys.stderr)
        return 2
