"""`rtrl train` as one round or as a service: what it reads, what it decides, what it announces.

One round (:func:`train_once`) trains the served checkpoint on its batches that no checkpoint
was trained on yet. The service (:func:`watch`) does that whenever the warehouse offers a new
batch of the checkpoint being served, so a promoted checkpoint is trained on again as soon as
its own data has settled: the loop closes in the time the data takes, not in a release cycle.
Between rounds it polls the compacted ``batches`` topic (``infra.periodic``). A stop request
(SIGTERM) ends a round in progress within seconds: between its stages, or between two
micro-batches of its update, whose state is saved so that the next start resumes it where it
stopped (the gate's evals, once begun, run to their end). A round that failed for a passing
reason (Kafka unreachable, the catalog being replaced, its eval server timing out or restarting)
is given up with its reason in the log and tried again at the next look, from its saved state.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import duckdb
import httpx
from confluent_kafka import KafkaException

from checkpoints.publish import announce_missing
from checkpoints.record import CANARY, PROMOTED, CheckpointInfo
from checkpoints.store import CheckpointRegistry, next_id
from infra.periodic import run_every
from models.devices import make_accelerator
from trainer.exit_codes import (
    EXIT_NOTHING_TO_TRAIN,
    EXIT_PROMOTED,
    EXIT_REJECTED,
    EXIT_WAITING,
)
from trainer.inputs import alarms_of, attempts_on, earlier_batches, offered_batches, untrained
from trainer.metrics import TrainerMetrics
from trainer.round_examples import TooFewExamples, fresh, read_round, training_window
from trainer.round_gate import attempt_of
from trainer.round_options import RoundOptions
from trainer.round_state import RoundStopped
from trainer.train import train_round
from trainer.trigger import Evidence, evidence_of, waiting_for

log = logging.getLogger("rtrl.train")


def train_once(options: RoundOptions, idle_level: int = logging.INFO,
               stop: threading.Event | None = None,
               said: dict[str, str] | None = None,
               metrics: TrainerMetrics | None = None) -> int:  # fmt: skip
    """One round; the exit code: 0 promoted, 3 rejected, 1 nothing to train on (said at
    ``idle_level``: the service says it once, not at every look), 4 waiting. ``stop`` set ends
    a round in progress within seconds (:class:`~trainer.round_state.RoundStopped`). A round
    whose batches cannot yet meet the gate's minimum evidence waits (``trainer.trigger``): its
    batches stay untrained for the next look, said at INFO when what it waits for changed since
    ``said`` last held it."""
    registry = CheckpointRegistry(options.registry)
    if options.publish:  # first what an earlier run registered but could not announce
        announce_missing(options.bootstrap, options.topics.checkpoints, registry)
    line = options.org or "the shared line"
    parent = (
        registry.get(options.checkpoint) if options.checkpoint else registry.current(options.org)
    )
    if parent is None:
        log.log(
            logging.ERROR if idle_level == logging.INFO else idle_level,
            "no promoted checkpoint in %s: `rtrl checkpoints init` makes the first",
            options.registry,
        )
        return EXIT_NOTHING_TO_TRAIN
    live = [i.checkpoint_id for i in registry.list() if i.status == CANARY and
            i.org_id == options.org]  # fmt: skip
    if live:
        log.log(
            idle_level,
            "canary %s is live: its verdict (`rtrl canary decide`) says which checkpoint "
            "trains next",
            ", ".join(live),
        )
        return EXIT_NOTHING_TO_TRAIN
    offered = offered_batches(options.bootstrap, options.topics.batches)
    batches = untrained(offered, registry, parent.checkpoint_id, options.warehouse, options.org)
    if not batches:
        log.log(
            idle_level,
            "no new offered batch of %s on %s (%d offered in all)",
            parent.checkpoint_id,
            options.topics.batches,
            len(offered),
        )
        return EXIT_NOTHING_TO_TRAIN
    attempts = attempts_on(registry, parent.checkpoint_id, options.org)
    short, have = _waiting_for(parent, batches, options, attempts if said is not None else [])
    if short is not None:
        if metrics is not None:
            metrics.waiting(have.runs if have else 0, have.users if have else 0,
                            options.gate.min_examples, options.gate.min_users)  # fmt: skip
        level = logging.DEBUG if said is not None and said.get("waiting") == short else logging.INFO
        if said is not None:
            said["waiting"] = short
        log.log(level, "waiting to train %s for %s on %d batch(es): %s", parent.checkpoint_id,
                line, len(batches), short)  # fmt: skip
        return EXIT_WAITING
    catalog = options.catalog or options.warehouse / "warehouse.duckdb"
    look = attempt_of(registry, parent.checkpoint_id, options.org)  # a look at the pair a round
    alarms = alarms_of(catalog, registry, parent.checkpoint_id, options.thresholds, look,
                       options.org)  # fmt: skip
    log.info(
        "training %s for %s on %d batch(es) (the gate's evidence from all %d), %d monitor "
        "alarm(s) of it against its parent (look %d)",
        parent.checkpoint_id,
        line,
        len(training_window([b for b, _ in batches], options.train_window, attempts)),
        len(batches),
        len(alarms),
        look,
    )
    accelerator = make_accelerator(options.device, options.bf16)
    log.info(
        "training on %s (%d process(es), mixed precision %s)",
        accelerator.device,
        accelerator.num_processes,
        accelerator.mixed_precision,
    )
    if metrics is not None:
        metrics.phase.state("training")
    started = time.monotonic()
    earlier = earlier_batches(offered, registry, parent.checkpoint_id, options.evidence_depth,
                              options.warehouse)  # fmt: skip
    if earlier:
        served_by = ", ".join(sorted({c for _, c, _ in earlier}))
        log.info("the gate also reads the held-out users of %d batch(es) of %s, both arms "
                 "off-policy", len(earlier), served_by)  # fmt: skip
    result = train_round(
        registry,
        parent.checkpoint_id,
        batches,
        options.candidate_id or next_id(registry, parent),
        options,
        alarms,
        accelerator,
        stop,
        earlier,
    )
    if result is None:  # not the main process: the main one registers and announces
        return 0
    info, est = result.candidate, result.estimate
    if metrics is not None:
        metrics.rounds.labels(info.status).inc()
        metrics.round_seconds.set(time.monotonic() - started)
    stats = result.stats
    print(
        f"  update: {stats.grad_steps} steps over {stats.epochs_run} epoch(s) of {stats.runs} "
        f"runs, {stats.tokens_per_s:.0f} tokens/s, KL from parent {stats.approx_kl:.4f} a "
        f"token, {stats.run_kl:.4f} a run (budget {stats.kl_budget:.4f}, lr x{stats.lr_scale:.3g})"
        f"{' (a later epoch stopped at the KL rule)' if stats.early_stopped else ''}",
        flush=True,
    )
    print(
        f"{info.checkpoint_id} from {parent.checkpoint_id}: {info.status.upper()}; "
        f"{result.n_train} examples trained, {result.n_held_out} held out; reward "
        f"{est.behaviour_mean:+.3f} served, {est.value:+.3f} estimated for the candidate, "
        f"gain {est.gain:+.3f} with a {100 * est.level:.4g}% lower bound {est.lower:+.3f} "
        f"(ESS {est.ess:.0f}, KL {est.kl:.3f}, {est.method}, n {est.n})",
        flush=True,
    )
    for batch, figures in info.evals.get("mismatch", {}).items():
        print(f"  mismatch KL of {batch}: k1 {figures['k1']:+.4f}, k3 {figures['k3']:.4f} nats "
              f"per token{' QUARANTINED' if figures['reason'] else ''}", flush=True)  # fmt: skip
    for reason in info.reasons:
        print(f"  gate: {reason}", flush=True)
    if options.publish:
        announce_missing(options.bootstrap, options.topics.checkpoints, registry)
    return EXIT_PROMOTED if info.status in (PROMOTED, CANARY) else EXIT_REJECTED


def _waiting_for(parent: CheckpointInfo, batches: list[tuple[str, list[Path]]],
                 options: RoundOptions, attempts: list[tuple[str, ...]],
                 ) -> tuple[str | None, Evidence | None]:  # fmt: skip
    """What the round still lacks before it may start (None: nothing), and what it has.

    With ``attempts`` (the batches of the parent's earlier attempts; the service passes them),
    a retry also waits until the batches no attempt tried hold the gate's minimum evidence on
    their own: a round's worth of new users. Otherwise a batch builder that builds every few
    seconds would start a retry on the first small batch after a rejection, train it on a
    sliver and spend an attempt's alpha on it. One `rtrl train` is asked for a round now and
    passes none."""
    try:
        data = read_round(parent, batches, options.held_out, options.org, options.own_only,
                          options.train_window, attempts)  # fmt: skip
    except TooFewExamples as exc:
        return str(exc), None
    short = waiting_for(data, options.gate)
    if short is not None or not attempts:
        return short, evidence_of(data)
    new = set(fresh([b for b, _ in batches], attempts))
    try:
        since = read_round(parent, [b for b in batches if b[0] in new], options.held_out,
                           options.org, options.own_only)  # fmt: skip
    except (TooFewExamples, ValueError) as exc:
        return f"since the last attempt: {exc}", None
    short = waiting_for(since, options.gate)
    return (f"since the last attempt: {short}" if short else None), evidence_of(since)


def watch(options: RoundOptions, interval_s: float, stop: threading.Event,
          metrics: TrainerMetrics | None = None) -> int:  # fmt: skip
    """Train the current promoted checkpoint whenever there is something to train it on, until
    ``stop`` is set; returns 0. ``options.checkpoint`` and ``candidate_id`` must be None."""
    if options.checkpoint or options.candidate_id:
        raise ValueError("the service trains the current promoted checkpoint under new ids")
    log.info(
        "watching %s every %g s for batches of the served checkpoint",
        options.topics.batches,
        interval_s,
    )
    idle_level = logging.INFO  # "nothing to train on" is said once until the next round
    said: dict[str, str] = {}  # what the round waits for, as last said

    transient = (KafkaException, RuntimeError, OSError, duckdb.Error, httpx.HTTPError)

    def counted(outcome: str) -> None:
        if metrics is not None:
            metrics.rounds.labels(outcome).inc()

    def step() -> bool:
        nonlocal idle_level
        if metrics is not None:
            metrics.phase.state("idle")  # until the look finds a round to wait for or train
        try:
            code = train_once(options, idle_level, stop, said, metrics)
        except RoundStopped as stopped:  # SIGTERM in the middle of a round: said, then out
            log.info("%s", stopped)
            counted("stopped")
            return False
        except ValueError as exc:  # the data: a person must look; the service goes on
            log.error("round refused: %s", exc)
            counted("refused")
            code = EXIT_NOTHING_TO_TRAIN
        except transient:  # given up for a passing failure: run_every logs it and looks again
            counted("given_up")
            raise
        idle = code in (EXIT_NOTHING_TO_TRAIN, EXIT_WAITING)
        idle_level = logging.DEBUG if idle else logging.INFO
        return not idle

    rounds = run_every(step, interval_s, stop, transient, log)
    if metrics is not None:
        metrics.phase.state("stopping")
    log.info("stopped after %d round(s)", rounds)
    return 0
