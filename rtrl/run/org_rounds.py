"""The orgs world's rounds (`rtrl run --world orgs`): each organisation's users, through its own
API key, served by its own line's promoted checkpoint or else the shared one; each line trained
and gated on its own users only (`rtrl train --org`); and at the end, per organisation, its last
promoted checkpoint against the shared one on its own users.

One gateway serves every organisation (it follows the ``checkpoints`` topic and takes up each
organisation's promoted checkpoint beside the shared one, ``serving.assignment``). The shared
line does not train here: the organisations' conventions conflict, and each line starts from the
shared checkpoint (the base model) as a deployment's would start from its current shared one.
A line's candidate is judged on its own held-out users of its parent's rounds and, after a
promotion, of its parent's parent's too (``--evidence-depth 1``: both arms off-policy).
The users of the world are ``rtrl.worlds.org_world``'s.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from checkpoints.record import PROMOTED
from checkpoints.store import CheckpointRegistry
from ingest.sdk import Client, SdkConfig
from rtrl.run.ab_round import CODE_AB_CONCURRENCY, arms, code_ab_asks
from rtrl.run.clock import CycleClock
from rtrl.run.gate_floor import gate_minimums
from rtrl.run.gateway import GatewaySetup, deliver_rollouts, gateway
from rtrl.run.procs import run_stage, wait_until
from rtrl.run.rounds import TRAIN_TIMEOUT_S, eval_engine_args
from rtrl.worlds.code_world import CodeWorldSettings, Outcome, play_users, round_asks
from rtrl.worlds.http_users import serving
from rtrl.worlds.org_world import (
    Move,
    OrgSpec,
    OrgTally,
    convention_move,
    move_text,
    reaction_rule,
    share_text,
)
from trainer.exit_codes import EXIT_NOTHING_TO_TRAIN, EXIT_REJECTED, EXIT_WAITING

if TYPE_CHECKING:
    from llamacpp.fleet import EngineSettings

log = logging.getLogger("rtrl.run")
SWITCH_TIMEOUT_S = 600.0  # an adapter's GGUF conversion and its server's start, on a busy CPU
AB_PREFIX = "final-ab-"  # each organisation's closing experiment: final-ab-<org>
# a line's candidate is also judged on the held-out users its parent's parent served (both arms
# off-policy): after a promotion a small organisation keeps its earlier round's evidence
EVIDENCE_DEPTH = 1


@dataclass(frozen=True)
class OrgRound:
    """One organisation's round: who served it, what its users got, and its line's candidate."""

    org: str
    number: int
    checkpoint_id: str
    tally: OrgTally
    candidate: str | None = None
    decision: str = "-"  # promoted, rejected, or waiting (the gate's minimums not yet met)
    reasons: tuple[str, ...] = ()


@dataclass(frozen=True)
class OrgAb:
    """An organisation's closing A/B: the shared checkpoint (control) against its line's last
    promoted one (treatment), on its own users; its convention's rate per arm, and the arms'
    tallies."""

    org: str
    control: str
    treatment: str
    convention: Move | None  # None: an arm wrote no edit
    arms: dict[str, OrgTally]
    seconds: float


@dataclass
class OrgLine:
    """An organisation's part of the run: its users a round, reporting SDK, client of the
    gateway (its API key), the checkpoint that serves it, and its rounds."""

    spec: OrgSpec
    users: int
    sdk: SdkConfig  # its API key too
    serving: str
    http: httpx.Client | None = None
    rounds: list[OrgRound] = field(default_factory=list)


@dataclass
class OrgRounds:
    root: Path
    kafka: list[str]
    lines: list[OrgLine]
    setup: GatewaySetup
    code: CodeWorldSettings
    train_args: tuple[str, ...]  # the world's learner and candidate evals, its reward config
    engine: EngineSettings | None = None  # the candidate evals' llama.cpp (None: transformers)
    clock: CycleClock = field(default_factory=CycleClock)
    played_until: float | None = None
    shared: str = ""  # the shared checkpoint, which serves every organisation at first
    closing: list[OrgAb] = field(default_factory=list)
    _gateway: ExitStack = field(default_factory=ExitStack)

    @property
    def registry(self) -> CheckpointRegistry:
        return CheckpointRegistry(self.root / "checkpoints")

    def start(self, root_id: str) -> None:
        """Serve ``root_id`` (registered and announced) to every organisation."""
        self.shared = root_id
        self._gateway.enter_context(gateway(self.setup, root_id, [], self._log("gateway")))
        for line in self.lines:
            line.http = self._gateway.enter_context(self._client(self.setup.port, line.sdk.api_key))
            line.serving = root_id

    def _client(self, port: int, key: str) -> httpx.Client:
        return httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=self.setup.timeout_s,
                            headers={"Authorization": f"Bearer {key}"})  # fmt: skip

    def _log(self, name: str) -> Path:
        return self.root / "logs" / f"{name}.log"

    def play(self, number: int, seed: int) -> None:
        """A round: every organisation's users at once, each through its own key. At once, not
        in turn: once lines have servers of their own, the gateway divides the threads among
        them, and one organisation alone would leave the others' threads idle."""
        self.clock.start_cycle()
        pool = ThreadPoolExecutor(len(self.lines))
        try:
            with self.clock.stage("serve"):
                for done in [pool.submit(self._play_line, line, number, seed)
                             for line in self.lines]:  # fmt: skip
                    done.result()
        finally:  # interrupted: the run stops the gateway, which ends the users' requests
            pool.shutdown(wait=False, cancel_futures=True)
        self.played_until = time.monotonic()

    def _play_line(self, line: OrgLine, number: int, seed: int) -> None:
        assert line.http is not None
        asks = round_asks(line.users, seed * 1000 + number)
        with Client(line.sdk) as client:
            outcomes = play_users(line.http, client, asks, self.code.sampling,
                                  react_to=reaction_rule(line.spec.convention))  # fmt: skip
            left = client.flush(timeout=60)
        if left:
            log.warning("%s: %d events not yet acknowledged (kept in the spool)", line.spec.name,
                        left)  # fmt: skip
        served = {o.answer.checkpoint_id for o in outcomes}
        if served != {line.serving}:
            raise RuntimeError(f"{line.spec.name} was served by {sorted(served)}, not by "
                               f"{line.serving}")  # fmt: skip
        tally = OrgTally.of(outcomes, line.spec.convention)
        line.rounds.append(OrgRound(line.spec.name, number, line.serving, tally))
        log.info("round %d, %s: %d users served by %s: convention (%s) met %s, passing %s, "
                 "kept %s, dissatisfied %s", number, line.spec.name, tally.answers, line.serving,
                 line.spec.convention or "none: prose first", share_text(tally.share("followed")),
                 share_text(tally.share("passed")), share_text(tally.share("kept")),
                 share_text(tally.share("dissatisfied")))  # fmt: skip

    def deliver_rollouts(self, timeout_s: float = 60.0) -> None:
        """Until Kafka holds the round's rollouts (``rtrl.run.gateway.deliver_rollouts``)."""
        deliver_rollouts(self.lines[0].http, timeout_s)

    def train(self, warehouse: Path) -> None:
        """`rtrl train --org` for each organisation, on its own users of what served it; wait
        until a promoted candidate serves that organisation."""
        with self.clock.stage("train"):
            for line in self.lines:
                self._train_line(line, warehouse)
        with self.clock.stage("switch"):
            for line in self.lines:
                last = line.rounds[-1]
                if last.decision == PROMOTED and last.candidate:
                    self._wait_until_served(line, last.candidate)

    def _train_line(self, line: OrgLine, warehouse: Path) -> None:
        org = line.spec.name
        before = {i.checkpoint_id for i in self.registry.list()}
        args = [*self.train_args, *eval_engine_args(self.engine)]
        out = run_stage(
            "train",
            ["train", "--registry", str(self.root / "checkpoints"), "--warehouse", str(warehouse),
             "--org", org, "--evidence-depth", str(EVIDENCE_DEPTH),
             *gate_minimums(line.users, args), *args, "--publish", *self.kafka],
            self._log("train"), timeout=TRAIN_TIMEOUT_S,
            ok=(0, EXIT_REJECTED, EXIT_NOTHING_TO_TRAIN, EXIT_WAITING),
        )  # fmt: skip
        print(out, end="")
        new = [i for i in self.registry.list() if i.checkpoint_id not in before and i.org_id == org]
        last = line.rounds[-1]
        if not new:
            line.rounds[-1] = replace(last, decision="waiting")
            log.info("gate, %s: nothing judged (its evidence is below the gate's minimums)", org)
            return
        info = new[-1]
        line.rounds[-1] = replace(last, candidate=info.checkpoint_id, decision=info.status,
                                  reasons=tuple(info.reasons))  # fmt: skip
        why = "" if info.status == PROMOTED else ": " + "; ".join(info.reasons)
        log.info("gate, %s: %s (trained on its own users of %s) %s%s", org, info.checkpoint_id,
                 last.checkpoint_id, info.status, why)  # fmt: skip

    def _wait_until_served(self, line: OrgLine, checkpoint_id: str) -> None:
        """Until the gateway serves ``checkpoint_id`` to ``line``'s organisation."""
        assert line.http is not None
        http = line.http
        wait_until(f"{line.spec.name}'s {checkpoint_id}",
                   lambda: serving(http) == checkpoint_id, SWITCH_TIMEOUT_S)  # fmt: skip
        line.serving = checkpoint_id

    def close(self) -> None:
        """Stop the rounds' gateway (idempotent)."""
        self._gateway.close()
        for line in self.lines:
            line.http = None

    def play_closing(self, ab_users: int, seed: int) -> None:
        """Each organisation whose line promoted a checkpoint: its last one against the shared
        checkpoint, half of its own users each (two asks a user), through a gateway whose
        split holds that organisation's users only."""
        shared = self.shared
        self.close()  # the rounds' gateway gives its port to the experiments'
        for line in self.lines:
            if line.serving == shared:
                log.info("closing A/B, %s: nothing of its line was promoted, it is served by the "
                         "shared %s", line.spec.name, shared)  # fmt: skip
                continue
            self.closing.append(self._closing_ab(line, shared, line.spec.users(ab_users), seed))
        self.played_until = time.monotonic()

    def _closing_ab(self, line: OrgLine, shared: str, users: int, seed: int) -> OrgAb:
        org, began = line.spec.name, time.monotonic()
        split = ["--experiment", AB_PREFIX + org, "--arms", arms(shared, line.serving),
                 "--experiment-org", org, "--no-follow"]  # fmt: skip
        setup = replace(self.setup, api_key=line.sdk.api_key)
        with gateway(setup, shared, split, self._log("gateway")) as http:
            with Client(replace(line.sdk, spool_path=self.root / f"ab-{org}.db")) as client:
                asks = code_ab_asks(users, 2, seed)
                outcomes = play_users(http, client, asks, self.code.sampling,
                                      concurrency=CODE_AB_CONCURRENCY,
                                      react_to=reaction_rule(line.spec.convention))  # fmt: skip
                client.flush(timeout=60)
        by_arm = _by_arm(outcomes)
        ab = OrgAb(org, shared, line.serving,
                   convention_move(by_arm["control"], by_arm["treatment"], line.spec.convention),
                   {arm: OrgTally.of(o, line.spec.convention) for arm, o in by_arm.items()},
                   time.monotonic() - began)  # fmt: skip
        log.info("closing A/B, %s: %s against %s, answers per arm %s; %s, in %.0fs", org,
                 shared, line.serving, {a: t.answers for a, t in ab.arms.items()},
                 move_text(ab.convention), ab.seconds)  # fmt: skip
        return ab


def _by_arm(outcomes: list[Outcome]) -> dict[str, list[Outcome]]:
    """The outcomes of each arm of the split (an answer outside it is a bug: refused)."""
    arms_: dict[str, list[Outcome]] = {"control": [], "treatment": []}
    for o in outcomes:
        if o.answer.experiment is None or o.answer.experiment[1] not in arms_:
            raise RuntimeError(f"an answer outside the closing split: {o.answer.experiment}")
        arms_[o.answer.experiment[1]].append(o)
    return arms_
