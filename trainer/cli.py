"""Subcommands of the trainer: `rtrl checkpoints init|list|announce|rollback` and `rtrl train`
(`rtrl models` in ``trainer.models_cli``).

Handlers import torch when they run, so ``rtrl --help`` stays fast.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

from infra.cli import (
    add_bootstrap_arg,
    add_topic_prefix_arg,
    add_watch_args,
    bootstrap_from,
    positive_int,
)
from trainer.canary_cli import register_canary
from trainer.devices import DEVICES
from trainer.exit_codes import EXIT_REJECTED
from trainer.learner_cli import add_learner_args, learner_from
from trainer.models_cli import register_models

log = logging.getLogger("rtrl.train")
DEFAULT_REGISTRY = ".rtrl/checkpoints"


def register(sub: argparse._SubParsersAction) -> None:
    register_models(sub)
    register_canary(sub)
    c = sub.add_parser("checkpoints", help="the checkpoint registry: create the first, announce, "
                       "list",
                       description="Checkpoints live in a registry folder, one sub-folder per "
                       "checkpoint (weights.safetensors and checkpoint.json); an id names one set "
                       "of weights forever.")  # fmt: skip
    csub = c.add_subparsers(dest="checkpoints_command", metavar="ACTION", required=True)
    init = csub.add_parser("init", help="register a base model as the first promoted checkpoint "
                           "(and announce it with --publish)",
                           description="The first checkpoint of a lineage is its base model: "
                           "nothing is copied, the checkpoint names the base by path and "
                           "content hash.")  # fmt: skip
    _add_registry(init)
    init.add_argument("--id", required=True, help="its checkpoint id, e.g. smol-0000")
    init.add_argument(
        "--model",
        required=True,
        help="a known model (smollm2-135m, tiny; fetched into the cache if "
        "needed) or a local path: a Hugging Face model directory or a .gguf file",
    )
    _add_publish(init)
    init.set_defaults(func=_init)
    back = csub.add_parser(
        "rollback",
        help="serve an earlier checkpoint's weights again: "
        "register them under a new id, promoted, and announce it",
        description="Serving only moves forward, to a promoted checkpoint "
        "newer than the one it serves, and an id names one set of weights "
        "forever: a rollback is a new checkpoint with old weights.",
    )
    _add_registry(back)
    back.add_argument("--to", required=True, help="the checkpoint whose weights to serve again")
    back.add_argument("--id", default=None, help="the new id (default: the next number)")
    add_bootstrap_arg(back)
    add_topic_prefix_arg(back)
    back.set_defaults(func=_rollback)
    announce = csub.add_parser(
        "announce",
        help="announce every registered checkpoint the "
        "checkpoints topic does not hold yet (after a crash)",
    )
    _add_registry(announce)
    add_bootstrap_arg(announce)
    add_topic_prefix_arg(announce)
    announce.set_defaults(func=_announce_all)
    ls = csub.add_parser("list", help="every checkpoint: parent, status, eval figures")
    _add_registry(ls)
    ls.add_argument(
        "--json",
        action="store_true",
        help="one JSON object per checkpoint, as the registry stores it, in a JSON array",
    )
    ls.add_argument(
        "--plot",
        type=Path,
        default=None,
        help="also draw each checkpoint's measured reward beside the gate's "
        "estimate (.svg, .png or .pdf); needs --catalog",
    )
    ls.add_argument(
        "--catalog",
        type=Path,
        default=None,
        help="the warehouse's DuckDB catalog (its rewards mart) for --plot",
    )
    ls.set_defaults(func=_list)

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
    _add_registry(t)
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
        "--eval-reader",
        choices=("harness", "simulated"),
        default="harness",
        help="how the candidate evals read a generation: harness (the agent harness over "
        "real text: code blocks, tool-call blocks, questions) or simulated (the token-level "
        "users of rtrl run)",
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
        "--canary-interactions",
        type=positive_int,
        default=200,
        help="canary interactions before its live reward is judged (default 200)",
    )
    add_watch_args(t, "train whenever the served checkpoint has a new batch", 30.0)
    _add_publish(t)  # the batches are read from the batches topic of the same cluster
    t.set_defaults(func=_train)


def _add_registry(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--registry",
        type=Path,
        default=Path(DEFAULT_REGISTRY),
        help=f"registry folder (default {DEFAULT_REGISTRY})",
    )


def _add_publish(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--publish",
        action="store_true",
        help="announce on the checkpoints topic every registered checkpoint it does "
        "not hold yet (this one, and any a crash left unannounced)",
    )
    add_bootstrap_arg(p)
    add_topic_prefix_arg(p)


def _announce(args: argparse.Namespace, registry: Any) -> None:
    from infra.topics import TopicNames
    from trainer.publish import announce_missing

    announce_missing(bootstrap_from(args), TopicNames(args.topic_prefix).checkpoints, registry)


def _init(args: argparse.Namespace) -> int:
    from trainer.checkpoint_io import register_base
    from trainer.models import ModelFetchError, models_dir, resolve
    from trainer.registry import CheckpointRegistry

    try:
        path = resolve(args.model, models_dir())
        info = register_base(
            CheckpointRegistry(args.registry), args.id, path, evals={"model": args.model}
        )
    except (ValueError, ModelFetchError) as exc:  # a taken id, an unknown or bad model
        log.error("%s", exc)
        return 2
    print(
        f"{info.checkpoint_id}: promoted, the {info.model.family} base {info.model.base_path}"
        f" (sha256 {info.model.base_sha256[:12]})"
    )
    if args.publish:
        _announce(args, CheckpointRegistry(args.registry))
    return 0


def _rollback(args: argparse.Namespace) -> int:
    from trainer.checkpoint_io import copy_as
    from trainer.inputs import next_id
    from trainer.registry import CheckpointRegistry

    registry = CheckpointRegistry(args.registry)
    try:
        old = registry.get(args.to)
        current = registry.current()
        info = copy_as(
            registry,
            old,
            args.id or next_id(registry, current or old),
            evals={"rollback_of": old.checkpoint_id},
        )
    except (KeyError, ValueError) as exc:
        log.error("%s", exc.args[0] if exc.args else exc)
        return 2
    print(f"{info.checkpoint_id}: the weights of {old.checkpoint_id}, promoted")
    _announce(args, registry)
    return 0


def _announce_all(args: argparse.Namespace) -> int:
    from trainer.registry import CheckpointRegistry

    _announce(args, CheckpointRegistry(args.registry))
    return 0


def _list(args: argparse.Namespace) -> int:
    from trainer.registry import CheckpointRegistry

    if args.plot and not args.catalog:
        log.error("--plot needs --catalog: the measured rewards come from its rewards mart")
        return 2
    infos = CheckpointRegistry(args.registry).list()
    if args.json:
        import orjson

        print(
            orjson.dumps(
                [{**info.to_json_dict(), "decision": info.decision()} for info in infos],
                option=orjson.OPT_INDENT_2,
            ).decode()
        )
        return 0
    if not infos:
        print(f"no checkpoints in {args.registry}")
        return 0
    if args.plot:
        import duckdb

        from trainer.lineage_plot import measured_rewards, plot_lineage

        with duckdb.connect(str(args.catalog), read_only=True) as con:
            records = con.sql("SELECT checkpoint_id, status, reward FROM rewards").pl()
        log.info("drew %s", plot_lineage(infos, measured_rewards(records), args.plot))
    print(
        f"{'checkpoint':<16} {'parent':<16} {'status':<9} {'weights':<7} {'step':>5} "
        f"{'est. gain':>9} {'lower':>7} {'ESS':>6} {'KL':>6} {'canary':<12} batches"
    )
    for info in infos:
        gate = info.evals.get("gate", {})
        gain, kl, lower, ess = gate.get("gain"), gate.get("kl"), gate.get("lower"), gate.get("ess")
        print(
            f"{info.checkpoint_id:<16} {info.parent or '-':<16} {info.status:<9} "
            f"{info.weights.kind:<7} {info.training.step:>5} "
            f"{_num(gain, '+.3f'):>9} {_num(lower, '+.3f'):>7} {_num(ess, '.0f'):>6} "
            f"{_num(kl, '.3f'):>6} {_canary(info):<12} {len(info.batches)}"
            + (f"  ({'; '.join(info.reasons)})" if info.reasons else "")
        )
    return 0


def _canary(info: Any) -> str:
    stage = info.evals.get("canary")
    if stage is None:
        return "-"
    return stage.get("outcome") or f"live, {stage.get('looks', 0)} looks"


def _num(value: object, spec: str) -> str:
    return format(value, spec) if isinstance(value, int | float) else "-"


def _train(args: argparse.Namespace) -> int:
    import threading

    from infra.lifetime import stop_signals_call
    from infra.topics import TopicNames
    from trainer.canary import CanaryConfig
    from trainer.gate import GateConfig
    from trainer.loading import LoraSettings
    from trainer.service import RoundOptions, train_once, watch

    if args.watch and (args.checkpoint or args.id):
        log.error(
            "--watch always trains the current promoted checkpoint: no --checkpoint or --id with it"
        )
        return 2
    try:
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
            gate=GateConfig(
                min_gain=args.min_gain,
                max_kl=args.max_kl,
                level=args.level,
                eval_prompts=args.eval_prompts,
                eval_reader=args.eval_reader,
            ),
            held_out=args.held_out,
            catalog=args.catalog,
            checkpoint=args.checkpoint,
            candidate_id=args.id,
            thresholds=args.thresholds,
            canary=None
            if args.canary is None
            else CanaryConfig(percent=args.canary, min_interactions=args.canary_interactions),
            publish=args.publish,
        )
    except ValueError as exc:  # an option out of range (pydantic's errors are ValueErrors)
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
