"""`rtrl checkpoints init|list|announce|rollback`: the checkpoint registry from the command line
(its options: ``checkpoints.cli_options``), and the registry and publishing options `rtrl train`
shares.

Handlers import torch when they run, so ``rtrl --help`` stays fast.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

from checkpoints.cli_options import (
    ANNOUNCE_OPTIONS,
    DEFAULT_REGISTRY,
    INIT_OPTIONS,
    LIST_OPTIONS,
    ROLLBACK_OPTIONS,
)
from infra.cli import add_bootstrap_arg, add_topic_prefix_arg
from infra.settings_cli import add_command, add_group

log = logging.getLogger("rtrl.train")


def register(sub: argparse._SubParsersAction) -> None:
    csub = add_group(sub, "checkpoints", help="the checkpoint registry: create the first, "
                     "announce, list",
                     description="Checkpoints live in a registry folder, one sub-folder per "
                     "checkpoint (weights.safetensors and checkpoint.json); an id names one set "
                     "of weights forever.")  # fmt: skip
    add_command(csub, "init", _init, INIT_OPTIONS, help="register a base model as the first "
                "promoted checkpoint (and announce it with --publish)",
                description="The first checkpoint of a lineage is its base model: nothing is "
                "copied, the checkpoint names the base by path and content hash.")  # fmt: skip
    add_command(
        csub,
        "rollback",
        _rollback,
        ROLLBACK_OPTIONS,
        help="serve an earlier checkpoint's weights again: "
        "register them under a new id, promoted, and announce it",
        description="Serving only moves forward, to a promoted checkpoint "
        "newer than the one it serves, and an id names one set of weights "
        "forever: a rollback is a new checkpoint with old weights.",
    )
    add_command(
        csub,
        "announce",
        _announce_all,
        ANNOUNCE_OPTIONS,
        help="announce every registered checkpoint the "
        "checkpoints topic does not hold yet (after a crash)",
    )
    add_command(
        csub, "list", _list, LIST_OPTIONS, help="every checkpoint: parent, status, eval figures"
    )


def add_registry(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--registry",
        type=Path,
        default=Path(DEFAULT_REGISTRY),
        help=f"registry folder (default {DEFAULT_REGISTRY})",
    )


def add_publish(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--publish",
        action="store_true",
        help="announce on the checkpoints topic every registered checkpoint it does "
        "not hold yet (this one, and any a crash left unannounced)",
    )
    add_bootstrap_arg(p)
    add_topic_prefix_arg(p)


def announce(bootstrap: str, topic_prefix: str, registry: Any) -> None:
    from checkpoints.publish import announce_missing
    from infra.topics import TopicNames

    announce_missing(bootstrap, TopicNames(topic_prefix).checkpoints, registry)


def _init(args: argparse.Namespace) -> int:
    from checkpoints.store import CheckpointRegistry
    from checkpoints.weights import register_base
    from models.catalog import ModelFetchError, models_dir, resolve

    options = INIT_OPTIONS.read(args)
    try:
        path = resolve(options.model, models_dir())
        info = register_base(
            CheckpointRegistry(options.registry), options.id, path, evals={"model": options.model}
        )
    except (ValueError, ModelFetchError) as exc:  # a taken id, an unknown or bad model
        log.error("%s", exc)
        return 2
    print(
        f"{info.checkpoint_id}: promoted, the {info.model.family} base {info.model.base_path}"
        f" (sha256 {info.model.base_sha256[:12]})"
    )
    if options.publish:
        announce(options.bootstrap, options.topic_prefix, CheckpointRegistry(options.registry))
    return 0


def _rollback(args: argparse.Namespace) -> int:
    from checkpoints.store import CheckpointRegistry, next_id
    from checkpoints.weights import copy_as

    options = ROLLBACK_OPTIONS.read(args)
    registry = CheckpointRegistry(options.registry)
    try:
        old = registry.get(options.to)
        current = registry.current()
        info = copy_as(
            registry,
            old,
            options.id or next_id(registry, current or old),
            evals={"rollback_of": old.checkpoint_id},
        )
    except (KeyError, ValueError) as exc:
        log.error("%s", exc.args[0] if exc.args else exc)
        return 2
    print(f"{info.checkpoint_id}: the weights of {old.checkpoint_id}, promoted")
    announce(options.bootstrap, options.topic_prefix, registry)
    return 0


def _announce_all(args: argparse.Namespace) -> int:
    from checkpoints.store import CheckpointRegistry

    options = ANNOUNCE_OPTIONS.read(args)
    announce(options.bootstrap, options.topic_prefix, CheckpointRegistry(options.registry))
    return 0


def _list(args: argparse.Namespace) -> int:
    from checkpoints.store import CheckpointRegistry

    options = LIST_OPTIONS.read(args)
    if options.plot and not options.catalog:
        log.error("--plot needs --catalog: the measured rewards come from its rewards mart")
        return 2
    registry = CheckpointRegistry(options.registry)
    infos = registry.list()
    if options.org is not None:  # the shared line and its own: never another organisation's
        infos = [i for i in infos if i.org_id in (None, options.org)]
    if options.json:
        import orjson

        print(
            orjson.dumps(
                [{**info.to_json_dict(), "decision": info.decision()} for info in infos],
                option=orjson.OPT_INDENT_2,
            ).decode()
        )
        return 0
    if not infos:
        print(f"no checkpoints in {options.registry}")
        return 0
    if options.plot:
        import duckdb

        from checkpoints.lineage_plot import measured_rewards, plot_lineage

        with duckdb.connect(str(options.catalog), read_only=True) as con:
            records = con.sql("SELECT checkpoint_id, status, reward FROM rewards").pl()
        log.info("drew %s", plot_lineage(infos, measured_rewards(records), options.plot))
    print(
        f"{'checkpoint':<16} {'parent':<16} {'line':<12} {'status':<9} {'weights':<7} "
        f"{'step':>5} {'est. gain':>9} {'lower':>7} {'ESS':>6} {'KL':>6} {'canary':<12} batches"
    )
    for info in infos:
        gate = info.evals.get("gate", {})
        gain, kl, lower, ess = gate.get("gain"), gate.get("kl"), gate.get("lower"), gate.get("ess")
        print(
            f"{info.checkpoint_id:<16} {info.parent or '-':<16} {info.org_id or 'shared':<12} "
            f"{info.status:<9} "
            f"{info.weights.kind:<7} {info.training.step:>5} "
            f"{_num(gain, '+.3f'):>9} {_num(lower, '+.3f'):>7} {_num(ess, '.0f'):>6} "
            f"{_num(kl, '.3f'):>6} {_canary(info):<12} {len(info.batches)}"
            + (f"  ({'; '.join(info.reasons)})" if info.reasons else "")
        )
    if options.org is not None:
        serving = registry.current(options.org)
        own = serving is not None and serving.org_id == options.org
        print(f"serves {options.org}: {serving.checkpoint_id if serving else '-'} "
              f"({'its own line' if own else 'the shared line'})")  # fmt: skip
    return 0


def _canary(info: Any) -> str:
    stage = info.evals.get("canary")
    if stage is None:
        return "-"
    return stage.get("outcome") or f"live, {stage.get('looks', 0)} looks"


def _num(value: object, spec: str) -> str:
    return format(value, spec) if isinstance(value, int | float) else "-"
