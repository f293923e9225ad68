"""The training rounds of `rtrl run`: serve, observe, land, train, gate, ship, serve again.

A causal language model (``--model``: the tiny one built here by default, or SmolLM2-135M) is
registered as the first checkpoint and served by the gateway, `rtrl serve`, in its own process
(it publishes every completion on ``rollouts`` and follows the ``checkpoints`` topic).
Simulated users (`rtrl.worlds.token_world`, ``--users``; in the code world the text users of
`rtrl.worlds.code_world`) ask it over HTTP and react to its edits through the SDK. Once their
windows closed, the warehouse lands rewards and rollouts and offers a batch per checkpoint; `rtrl
train` (its own process) updates the served checkpoint on its batch, gates the candidate and
announces it; the gateway hot-swaps to it when it is promoted, and the next round is served by it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from checkpoints.record import PROMOTED, CheckpointInfo
from checkpoints.store import CheckpointRegistry
from ingest.sdk import Client, SdkConfig
from models.sampling import SamplingParams
from rtrl.run.clock import CycleClock
from rtrl.run.gate_floor import gate_minimums
from rtrl.run.gateway import GatewaySetup, deliver_rollouts, gateway, refused_rollouts
from rtrl.run.procs import run_stage
from rtrl.worlds.agent_world import AgentWorldSettings, ClosingRuns
from rtrl.worlds.code_world import CodeWorldSettings, PassRate, rate_text
from rtrl.worlds.http_users import serving
from rtrl.worlds.token_reader import SIMULATED
from rtrl.worlds.token_users import POPULATIONS
from rtrl.worlds.token_world import RoundFigures, TrueValue, play_round, true_value
from trainer.exit_codes import EXIT_REJECTED, EXIT_WAITING

if TYPE_CHECKING:
    from llamacpp.fleet import EngineSettings
    from models.policy import Sampler

log = logging.getLogger("rtrl.run")
SAMPLING = SamplingParams(max_tokens=8, temperature=1.0)
# a round of `rtrl train` on a real model on a CPU takes 7-10 minutes (SmolLM2, 342 examples and
# its candidate evals: bench/RESULTS.md), past the other stages' 10-minute limit
TRAIN_TIMEOUT_S = 3600.0
# the run's learner: a few hundred examples a round, a fresh small model that must move
LEARNER_ARGS = ["--lr", "0.002", "--epochs", "4", "--minibatches", "4", "--micro-batch", "64",
                "--device", "cpu", "--eval-prompts", "16"]  # fmt: skip


@dataclass
class TrainingRounds:
    root: Path
    bootstrap: str
    prefix: str
    sdk: SdkConfig
    interactions: int
    seed: int
    model: str = "tiny"
    users: str = "default"  # rtrl.worlds.token_users.POPULATIONS
    truth_samples: int = 512  # completions per checkpoint for its true value (0: none)
    eval_reader: str = SIMULATED  # these users act on tokens, not text: the evals read so
    train_args: tuple[str, ...] = ()  # the scenario's, on top of LEARNER_ARGS
    figures: list[RoundFigures] = field(default_factory=list)
    # per round trained on, the candidate and its gate decision; None where the round's held-out
    # evidence was below the gate's minimums (`rtrl train` waited: its batch carries over)
    decisions: list[CheckpointInfo | None] = field(default_factory=list)
    truths: dict[str, TrueValue] = field(default_factory=dict)  # the simulator's, per checkpoint
    clock: CycleClock = field(default_factory=CycleClock)
    gateway_setup: GatewaySetup | None = None  # where the rounds' `rtrl serve` runs
    world: str = "tokens"  # "code": text users ask for easy tasks (rtrl.worlds.code_world)
    code: CodeWorldSettings = field(default_factory=CodeWorldSettings)
    agent: AgentWorldSettings = field(default_factory=AgentWorldSettings)  # "agent" world
    held_out: dict[str, PassRate] = field(default_factory=dict)  # the code world's, per checkpoint
    engine: EngineSettings | None = None  # the held-out evals' llama.cpp (None: transformers)
    serving: str | None = None  # the checkpoint the gateway serves
    # per round played: the answers served whose rollout the gateway refused (None: not known)
    refused: list[int | None] = field(default_factory=list)
    _refused_before: int | None = None  # the gateway's count when the round began
    # when the last user's last event was sent (time.monotonic()): the windows close from there
    played_until: float | None = None
    closing_runs: ClosingRuns = field(default_factory=ClosingRuns)  # the agent world's A/B's
    vocab_size: int = 0
    _http: httpx.Client | None = None
    _gateway: ExitStack = field(default_factory=ExitStack)

    @property
    def registry(self) -> CheckpointRegistry:
        return CheckpointRegistry(self.root / "checkpoints")

    @property
    def _kafka(self) -> list[str]:
        return ["--bootstrap", self.bootstrap, "--topic-prefix", self.prefix]

    def start(self) -> None:
        """Register the first checkpoint, announce it, and serve it from a gateway that
        follows the ``checkpoints`` topic."""
        root_id = register_root(self.root, self.model, self._kafka)
        from checkpoints.weights import load_policy

        if self.world == "tokens":
            self.vocab_size = load_policy(self.registry, self.registry.get(root_id)).vocab_size
        assert self.gateway_setup is not None
        self._http = self._gateway.enter_context(
            gateway(self.gateway_setup, root_id, [], self.root / "logs" / "gateway.log")
        )
        self.serving = root_id

    def play(self, number: int) -> RoundFigures:
        """One round of simulated users against the served checkpoint."""
        assert self._http is not None
        self.clock.start_cycle()
        self._refused_before = self._refused_now()
        if self.world == "code":
            return self._play_code(number)
        if self.world == "agent":
            return self._play_agent(number)
        with self.clock.stage("serve"), Client(self.sdk) as client:
            population = POPULATIONS[self.users](self.vocab_size)
            figures = play_round(
                self._http,
                client,
                population,
                self.interactions,
                seed=self.seed * 1000 + number,
                params=SAMPLING,
            )
            left = client.flush(timeout=60)
        self.played_until = time.monotonic()
        if left:
            log.warning(
                "round %d: %d events not yet acknowledged (kept in the spool)", number, left
            )
        log.info(
            "round %d: %d users served by %s (their taste of it: %.2f)",
            number,
            figures.interactions,
            figures.checkpoint_id,
            figures.taste,
        )
        self.figures.append(figures)
        return figures

    def _play_code(self, number: int) -> RoundFigures:
        """The code world's round: text users ask for easy tasks; then the served checkpoint's
        pass rate on the held-out tasks."""
        from rtrl.worlds.code_world import play_users, round_asks, tally

        assert self._http is not None
        with self.clock.stage("serve"), Client(self.sdk) as client:
            asks = round_asks(self.interactions, self.seed * 1000 + number)
            outcomes = play_users(self._http, client, asks, self.code.sampling)
            left = client.flush(timeout=60)
        self.played_until = time.monotonic()
        if left:
            log.warning("round %d: %d events not yet acknowledged (kept in the spool)", number,
                        left)  # fmt: skip
        served = {o.answer.checkpoint_id for o in outcomes}
        if len(served) != 1:
            raise RuntimeError(f"the served checkpoint changed within a round: {sorted(served)}")
        t, n = tally(outcomes), len(outcomes)
        figures = RoundFigures(served.pop(), n, t["accepted"], t["invalid_tool_calls"],
                               t["accepted"] / n, 0, t["passed"], t["kept"],
                               t["dissatisfied"])  # fmt: skip
        self.figures.append(figures)
        self.measure_held_out()  # while the round's windows close
        rate = self.held_out.get(figures.checkpoint_id)
        log.info("round %d: %d users served by %s: code passing the hidden tests %.2f, edits "
                 "kept %.2f, dissatisfied follow-ups %.2f, no code %.2f; held-out pass rate %s",
                 number, n, figures.checkpoint_id, t["passed"] / n, t["kept"] / n,
                 t["dissatisfied"] / n, t["no_code"] / n, rate_text(rate))  # fmt: skip
        return figures

    def _play_agent(self, number: int) -> RoundFigures:
        """The agent world's round: each user's run of the tool-calling agent on an easy task
        in a repository of its own (``rtrl.worlds.agent_world``)."""
        from rtrl.worlds.agent_world import (
            figures_text,
            play_agents,
            round_asks,
            round_figures,
            tally,
        )

        assert self._http is not None
        with self.clock.stage("serve"), Client(self.sdk) as client:
            asks = round_asks(self.interactions, self.seed * 1000 + number, self.sdk.org_id,
                              self.agent)  # fmt: skip
            outcomes = play_agents(self._http, client, asks, self.agent)
            left = client.flush(timeout=60)
        self.played_until = time.monotonic()
        if left:
            log.warning("round %d: %d events not yet acknowledged (kept in the spool)", number,
                        left)  # fmt: skip
        figures = round_figures(outcomes)
        self.figures.append(figures)
        log.info("round %d: %d agent runs served by %s: %s", number, len(outcomes),
                 figures.checkpoint_id, figures_text(tally(outcomes)))  # fmt: skip
        return figures

    def deliver_rollouts(self, timeout_s: float = 60.0) -> None:
        """Until Kafka holds the rounds' rollouts (``rtrl.run.gateway.deliver_rollouts``);
        then the round's refused rollouts are counted."""
        deliver_rollouts(self._http, timeout_s)
        self._count_refused()

    def _refused_now(self) -> int | None:
        try:
            return refused_rollouts(self._http) if self._http is not None else None
        except httpx.HTTPError:
            return None

    def _count_refused(self) -> None:
        """The latest round's refused rollouts, once its rollouts were delivered (each is
        built, and refused, after its answer); counted once per round."""
        if self._refused_before is None or len(self.refused) >= len(self.figures):
            return
        now = self._refused_now()
        counted = None if now is None or now < self._refused_before else now - self._refused_before
        self.refused.append(counted)  # None: the gateway could not say, or started again
        if counted:
            log.warning("round %d: %d answers served without a rollout (refused by the gateway: "
                        "never trained on)", len(self.figures), counted)  # fmt: skip

    def measure_held_out(self) -> None:
        """The code world's pass rate on the held-out tasks (the simulator's, never trained on)
        of every registered checkpoint not yet measured. Called after users were served, when
        the loop would otherwise only wait for their reward windows to close (``settle``
        counts from the last event): a candidate is measured after the next round's users,
        not in the minute after its gate decision."""
        if self.world != "code" or not self.code.eval_samples:
            return
        from rtrl.worlds.code_world import held_out_pass_rate

        for info in self.registry.list():
            if info.checkpoint_id in self.held_out:
                continue
            started = time.monotonic()
            with self._sampler(info) as sampler:
                self.held_out[info.checkpoint_id] = held_out_pass_rate(
                    sampler, self.code.sampling, self.code.eval_samples, self.seed
                )
            log.info("held-out eval of %s (%s): %s in %.0fs%s", info.checkpoint_id, info.status,
                     rate_text(self.held_out[info.checkpoint_id]), time.monotonic() - started,
                     " (llama.cpp)" if self.engine else "")  # fmt: skip

    @contextmanager
    def _sampler(self, info: CheckpointInfo) -> Iterator[Sampler]:
        """What samples ``info`` for the evals: llama.cpp on its GGUF files when the run serves
        with it (a server of its own, while the gateway's is idle), else transformers."""
        if self.engine is not None:
            from llamacpp.sampler import engine_sampler

            with engine_sampler(self.engine, self.registry, info) as sampler:
                yield sampler
        else:
            from checkpoints.weights import load_policy

            yield load_policy(self.registry, info)

    def train(self, warehouse: Path) -> CheckpointInfo | None:
        """`rtrl train` on the served checkpoint's new batches; wait until a promoted one is
        served. None when the batches' held-out evidence is below the gate's minimums: `rtrl
        train` waits (exit 4) and keeps them untrained, so the next round trains on them with
        its own, and the same checkpoint serves on."""
        assert self.serving is not None
        parent = self.serving
        before = {i.checkpoint_id for i in self.registry.list()}
        with self.clock.stage("train"):
            trained = run_stage(
                "train",
                ["train", "--registry", str(self.root / "checkpoints"), "--warehouse",
                 str(warehouse), "--checkpoint", parent, *self._learner_args(), "--publish",
                 *self._kafka],
                self.root / "logs" / "train.log",
                timeout=TRAIN_TIMEOUT_S,
                ok=(0, EXIT_REJECTED, EXIT_WAITING),
            )  # fmt: skip
        print(trained, end="")
        new = [i for i in self.registry.list() if i.checkpoint_id not in before]
        if not new:
            self.decisions.append(None)
            log.info("gate: nothing judged: %s's new batches hold too little held-out evidence "
                     "for the gate (its minimums); they carry over to the next round, and %s "
                     "serves on", parent, parent)  # fmt: skip
            return None
        decision = new[-1]
        self.decisions.append(decision)
        if self.world != "tokens":  # no truth to judge; code: held-out rate after the next users
            why = "" if decision.status == PROMOTED else ": " + "; ".join(decision.reasons)
            log.info("gate: %s (trained on %s's users) %s%s", decision.checkpoint_id, parent,
                     decision.status, why)  # fmt: skip
        elif self.truth_samples:
            self._judge_truth(parent, decision)
        with self.clock.stage("switch"):
            if decision.status == PROMOTED:
                self._wait_until_served(decision.checkpoint_id, 60)
        return decision

    @property
    def judged(self) -> list[CheckpointInfo]:
        """The candidates the rounds trained and the gate judged, in order."""
        return [d for d in self.decisions if d is not None]

    def _learner_args(self) -> list[str]:
        """The world's learner and gate, the gate's minimums fitted to the round first."""
        args = self._world_args()
        return [*gate_minimums(self.interactions, args), *args]

    def _world_args(self) -> list[str]:
        if self.world == "agent":
            return [*self.agent.train_args(), *self.train_args]
        if self.world == "code":  # real text: the candidate evals (if any) read it with the harness
            return [*self.code.train_args(), "--eval-reader", "harness",
                    *eval_engine_args(self.engine), *self.train_args]  # fmt: skip
        return [*LEARNER_ARGS, "--eval-reader", self.eval_reader, *self.train_args]

    def _wait_until_served(self, checkpoint_id: str, timeout_s: float) -> None:
        """Until the gateway, following the ``checkpoints`` topic, serves ``checkpoint_id``."""
        assert self._http is not None
        deadline = time.monotonic() + timeout_s
        while (now := serving(self._http)) != checkpoint_id:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the gateway serves {now}, not {checkpoint_id}")
            time.sleep(0.2)
        self.serving = checkpoint_id

    def _judge_truth(self, parent: str, candidate: CheckpointInfo) -> None:
        """The true value of the parent and of the candidate, on the same prompts and seeds."""
        from checkpoints.weights import load_policy

        for info in (self.registry.get(parent), candidate):
            if info.checkpoint_id in self.truths:
                continue
            policy = load_policy(self.registry, info)
            population = POPULATIONS[self.users](policy.vocab_size)
            self.truths[info.checkpoint_id] = true_value(
                policy, population, SAMPLING, self.truth_samples, seed=self.seed
            )
        log.info(
            "%s: true expected reward %+.4f, its parent %s %+.4f (the simulator's; never "
            "trained on)",
            candidate.checkpoint_id,
            self.truths[candidate.checkpoint_id].reward,
            parent,
            self.truths[parent].reward,
        )

    def close(self) -> None:
        """Stop the rounds' gateway (idempotent)."""
        self._gateway.close()
        self._http = None


def eval_engine_args(engine: EngineSettings | None) -> list[str]:
    """`rtrl train`'s options so that the candidate evals sample with the engine the users are
    served by (None: transformers, the trainer's default)."""
    if engine is None:
        return []
    return ["--eval-engine", "llama.cpp", *(["--eval-engine-exact"] if engine.exact else [])]


def register_root(root: Path, model: str, kafka: list[str]) -> str:
    """Register ``model`` as the first checkpoint of ``root``'s registry and announce it
    (`rtrl checkpoints init --publish`); its id: the model's name, or its path's, and 0000."""
    root_id = f"{Path(model).name.split('-')[0]}-0000"
    run_stage("checkpoints", ["checkpoints", "init", "--registry", str(root / "checkpoints"),
                              "--id", root_id, "--model", model, "--publish", *kafka],
              root / "logs" / "train.log")  # fmt: skip
    return root_id
