"""`rtrl serve`: the OpenAI-compatible gateway (``serving``). Only this handler reads the
environment (the upstream's API key, the bootstrap); the gateway itself gets a ServeConfig."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from infra.cli import add_bootstrap_arg, add_topic_prefix_arg, bootstrap_from, positive_int
from ingest.collector.config import DEFAULT_KEY_DB

DEFAULT_REGISTRY = ".rtrl/checkpoints"
UPSTREAM_KEY_ENV = "RTRL_UPSTREAM_API_KEY"


def register(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser(
        "serve",
        help="an OpenAI-compatible server that records every completion as a rollout",
        description="POST /v1/chat/completions and /v1/completions (stream and logprobs "
        "included), GET /v1/models, /livez, /readyz, /openapi.json; API keys as the collector's "
        "(Authorization: Bearer). Every completion goes to the rollouts topic with its token ids "
        "and behaviour log-probabilities (X-Rtrl-Privacy-Mode: true: never recorded); the "
        "answer says X-Rtrl-Interaction-Id, X-Rtrl-Checkpoint-Id and X-Rtrl-Experiment. "
        "Follows the checkpoints topic and moves to each newly promoted checkpoint.",
    )
    s.add_argument("--port", type=int, default=8000, help="TCP port (default 8000)")
    s.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    s.add_argument(
        "--registry",
        type=Path,
        default=Path(DEFAULT_REGISTRY),
        help=f"checkpoint registry folder (default {DEFAULT_REGISTRY})",
    )
    s.add_argument(
        "--checkpoint",
        default=None,
        help="checkpoint to serve first (default: the latest promoted); with "
        "--upstream, the one the upstream serves now",
    )
    s.add_argument(
        "--db",
        "--key-db",
        dest="key_db",
        type=Path,
        default=DEFAULT_KEY_DB,
        help=f"SQLite file of hashed API keys (default {DEFAULT_KEY_DB})",
    )
    add_bootstrap_arg(s)
    add_topic_prefix_arg(s)
    s.add_argument(
        "--upstream",
        default=None,
        metavar="URL",
        help="serve through this OpenAI-compatible server (vLLM, SGLang, another "
        "rtrl serve) instead of a local model; its API key from "
        f"${UPSTREAM_KEY_ENV}. vLLM must run with --logprobs-mode processed_logprobs "
        "(its default, raw_logprobs, gives log-probabilities from before temperature and "
        "top-p: `rtrl train` quarantines such batches). Sampling parameters a rollout does "
        "not record (top_k, min_p, penalties, logit_bias, ...) are refused with a 400",
    )
    s.add_argument(
        "--upstream-model",
        default=None,
        help="the name the upstream serves its base model under (default: the "
        "first of its /v1/models)",
    )
    s.add_argument(
        "--upstream-kind",
        choices=("auto", "openai", "llama.cpp"),
        default="auto",
        help="how to ask the upstream for exact token ids: openai (vLLM's "
        "return_token_ids), llama.cpp (its native endpoints), or auto (default: llama.cpp "
        "when GET /props answers as llama-server does at start)",
    )
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
    s.add_argument(
        "--engine-threads",
        type=positive_int,
        default=2,
        help="llama.cpp: CPU threads of all its servers together (default 2), divided among "
        "the checkpoints served at start (the followed one and the split's arms), since "
        "servers that each take every core fight over them",
    )
    s.add_argument(
        "--engine-slots",
        type=positive_int,
        default=8,
        help="llama.cpp: requests decoded together (default 8)",
    )
    s.add_argument(
        "--engine-outtype",
        choices=("f32", "f16", "bf16", "q8_0"),
        default="f16",
        help="llama.cpp: the type a full-weights checkpoint is converted to (default f16)",
    )
    s.add_argument(
        "--engine-exact",
        action="store_true",
        help="llama.cpp: serve a quantized GGUF base as the learner computes it, its "
        "dequantized weights converted once to --engine-outtype, so that the engine's "
        "log-probabilities are the learner's (SmolLM2's Q4_1 file: 0.004 nats a token apart "
        "as it is, 1e-5 at f16), for a larger file",
    )
    s.add_argument(
        "--engine-gguf-dir",
        type=Path,
        default=None,
        help="llama.cpp: where converted GGUF files are kept (default: the cache's "
        "llama.cpp/<version>/converted)",
    )
    s.add_argument(
        "--engine-drain-s",
        type=float,
        default=600.0,
        help="llama.cpp: longest wait for a replaced server's admitted requests before it is "
        "stopped (default 600)",
    )
    s.add_argument(
        "--adapter-dir",
        type=Path,
        default=Path(".rtrl/adapters"),
        help="where LoRA checkpoints are written as peft adapters for the upstream "
        "to load (a path the upstream can read)",
    )
    s.add_argument("--experiment", default=None, help="A/B experiment name (with --arms)")
    s.add_argument(
        "--arms",
        default=None,
        metavar="A=CKPT:W,B=CKPT:W",
        help="the experiment's arms: name=checkpoint:weight (checkpoint 'current' is "
        "the followed one); a user (X-Rtrl-User-Id) always lands in the same arm",
    )
    s.add_argument(
        "--canary",
        default=None,
        metavar="CKPT:PERCENT",
        help="serve CKPT to PERCENT of users against the followed checkpoint, as "
        "experiment canary-CKPT (arms parent and canary)",
    )
    s.add_argument("--device", default="cpu", help="local backend: torch device (cpu, cuda)")
    s.add_argument(
        "--max-batch",
        type=positive_int,
        default=16,
        help="local backend: most requests sampled together (default 16)",
    )
    s.add_argument(
        "--batch-wait-ms",
        type=float,
        default=0.0,
        help="local backend: how long a batch waits for more requests (default 0: "
        "it takes those already queued)",
    )
    s.add_argument(
        "--max-tokens",
        type=positive_int,
        default=256,
        help="completion tokens when a request does not say (default 256)",
    )
    s.add_argument(
        "--spool-max",
        type=positive_int,
        default=100_000,
        help="rollouts held while Kafka is unreachable; beyond, each is dropped "
        "(counted and logged)",
    )
    s.add_argument(
        "--served-model-name",
        nargs="+",
        default=["default"],
        metavar="NAME",
        help="names a request may give as its model for the checkpoint this gateway serves, "
        "besides the checkpoint ids of /v1/models; any other is a 404 (default: default)",
    )
    s.add_argument(
        "--hide-logprobs",
        action="store_true",
        help="never show log-probabilities to callers, as some hosted APIs do (they "
        "are still recorded)",
    )
    s.add_argument(
        "--no-record",
        action="store_true",
        help="record no rollouts (a backend standing as another gateway's upstream)",
    )
    s.add_argument(
        "--no-follow",
        action="store_true",
        help="do not follow the checkpoints topic (a backend standing as another "
        "gateway's upstream: that gateway loads what it serves)",
    )
    s.add_argument(
        "--metrics-port",
        type=int,
        default=None,
        help="serve Prometheus metrics on this port (/metrics); default: none",
    )
    s.add_argument("--seed", type=int, default=0, help="local backend: sampling seed")
    s.set_defaults(func=_serve)


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


def _serve(args: argparse.Namespace) -> int:
    engine = None
    if args.engine is not None:
        from llamacpp.cli import engine_settings

        try:
            if args.upstream is not None:
                raise ValueError("--engine starts its own upstream: not with --upstream")
            engine = engine_settings(
                args.engine_threads,
                args.engine_slots,
                args.engine_outtype,
                args.engine_drain_s,
                args.engine_gguf_dir,
                args.engine_exact,
            )
        except (ValueError, RuntimeError) as exc:
            print(f"rtrl serve: {exc}", file=sys.stderr)
            return 2
    return _run(args, engine)


def _run(args: argparse.Namespace, engine=None) -> int:  # engine: EngineSettings | None
    from serving.completions import GatewayConfig
    from serving.server import ServeConfig, run

    try:
        config = ServeConfig(
            registry=args.registry,
            checkpoint=args.checkpoint,
            key_db=args.key_db,
            bootstrap=bootstrap_from(args),
            topic_prefix=args.topic_prefix,
            host=args.host,
            port=args.port,
            metrics_port=args.metrics_port,
            upstream=args.upstream,
            upstream_model=args.upstream_model,
            upstream_api_key=os.environ.get(UPSTREAM_KEY_ENV),
            upstream_kind=args.upstream_kind,
            engine=engine,
            adapter_dir=args.adapter_dir,
            split=_split(args),
            device=args.device,
            max_batch=args.max_batch,
            batch_wait_s=args.batch_wait_ms / 1000,
            spool_max=args.spool_max,
            record=not args.no_record,
            follow=not args.no_follow,
            seed=args.seed,
            gateway=GatewayConfig(
                default_max_tokens=args.max_tokens,
                hide_logprobs=args.hide_logprobs,
                model_names=tuple(args.served_model_name),
            ),
        )
        return run(config)
    except (ValueError, KeyError, RuntimeError) as exc:
        print(f"rtrl serve: {exc}", file=sys.stderr)
        return 2
