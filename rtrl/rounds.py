"""The training rounds of `rtrl run`: serve, observe, land, train, gate, ship, serve again.

A causal language model (``--model``: the tiny one built here by default, or SmolLM2-135M) is
registered as the first checkpoint and served by the gateway, `rtrl serve`, in its own process
(it publishes every completion on ``rollouts`` and follows the ``checkpoints`` topic).
Simulated users (`rtrl.rl_sim`, ``--users``) ask it over HTTP and react to its edits through
the SDK. Once their windows closed, the warehouse lands rewards and rollouts and offers a batch
per checkpoint; `rtrl train` (its own process) updates the served checkpoint on its batch,
gates the candidate and announces it; the gateway hot-swaps to it when it is promoted, and the
next round is served by it.
"""

from __future__ import annotations

import logging
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from checkpoints.record import PROMOTED, CheckpointInfo
from checkpoints.store import CheckpointRegistry
from ingest.sdk import Client, SdkConfig
from models.sampling import SamplingParams
from rtrl.cycle_clock import CycleClock
from rtrl.gateway_stage import GatewaySetup, gateway
from rtrl.http_users import serving
from rtrl.procs import run_stage
from rtrl.rl_sim import RoundFigures, TrueValue, play_round, true_value
from rtrl.token_reader import SIMULATED
from rtrl.token_users import POPULATIONS
from trainer.exit_codes import EXIT_REJECTED

log = logging.getLogger("rtrl.run")
SAMPLING = SamplingParams(max_tokens=8, temperature=1.0)
# the run's learner: a few hundred examples a round, a fresh small model that must move
LEARNER_ARGS = [
    "--lr",
    "0.002",
    "--epochs",
    "4",
    "--minibatch",
    "64",
    "--micro-batch",
    "64",
    "--device",
    "cpu",
    "--eval-prompts",
    "16",
]


@dataclass
class TrainingRounds:
    root: Path
    bootstrap: str
    prefix: str
    sdk: SdkConfig
    interactions: int
    seed: int
    model: str = "tiny"
    users: str = "default"  # rtrl.token_users.POPULATIONS
    truth_samples: int = 512  # completions per checkpoint for its true value (0: none)
    eval_reader: str = SIMULATED  # these users act on tokens, not text: the evals read so
    train_args: tuple[str, ...] = ()  # the scenario's, on top of LEARNER_ARGS
    figures: list[RoundFigures] = field(default_factory=list)
    decisions: list[CheckpointInfo] = field(default_factory=list)
    truths: dict[str, TrueValue] = field(default_factory=dict)  # the simulator's, per checkpoint
    clock: CycleClock = field(default_factory=CycleClock)
    gateway_setup: GatewaySetup | None = None  # where the rounds' `rtrl serve` runs
    serving: str | None = None  # the checkpoint the gateway serves
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
        root_id = f"{self.model.split('-')[0]}-0000"
        run_stage(
            "checkpoints",
            [
                "checkpoints",
                "init",
                "--registry",
                str(self.root / "checkpoints"),
                "--id",
                root_id,
                "--model",
                self.model,
                "--publish",
                *self._kafka,
            ],
            self.root / "logs" / "train.log",
        )
        from checkpoints.weights import load_policy

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

    def train(self, warehouse: Path) -> CheckpointInfo:
        """`rtrl train` on the served checkpoint's new batch; wait until a promoted one is
        served."""
        assert self._http is not None and self.serving is not None
        parent = self.serving
        with self.clock.stage("train"):
            trained = run_stage(
                "train",
                [
                    "train",
                    "--registry",
                    str(self.root / "checkpoints"),
                    "--warehouse",
                    str(warehouse),
                    "--checkpoint",
                    parent,
                    *LEARNER_ARGS,
                    "--eval-reader",
                    self.eval_reader,
                    *self.train_args,
                    "--publish",
                    *self._kafka,
                ],
                self.root / "logs" / "train.log",
                ok=(0, EXIT_REJECTED),
            )
        print(trained, end="")
        decision = self.registry.list()[-1]
        self.decisions.append(decision)
        if self.truth_samples:
            self._judge_truth(parent, decision)
        with self.clock.stage("switch"):
            if decision.status == PROMOTED:
                self._wait_until_served(decision.checkpoint_id, 60)
        return decision

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


def print_summary(rounds: TrainingRounds, db: Path) -> None:
    """Per served checkpoint: what the users' taste says, and what the platform measured."""
    import duckdb

    with duckdb.connect(str(db), read_only=True) as con:
        measured = dict(
            con.sql(
                "SELECT checkpoint_id, avg(reward) FROM rewards WHERE status = 'scored' GROUP BY 1"
            ).fetchall()
        )
    verdicts = {d.checkpoint_id: d for d in rounds.decisions}
    print(
        "training rounds (simulated users; taste: their mean chance of accepting an edit, "
        "which the trainer never sees):"
    )
    print(
        f"  {'checkpoint':<11} {'users':>5} {'taste':>6} {'accepted':>8} {'invalid':>7} "
        f"{'asked':>6} {'reward':>7}  gate"
    )
    for f in rounds.figures:
        reward = measured.get(f.checkpoint_id)
        verdict = verdicts.get(f.checkpoint_id)
        print(
            f"  {f.checkpoint_id:<11} {f.interactions:>5} {f.taste:>6.2f} "
            f"{f.accepted / f.interactions:>8.2f} {f.invalid_tool_calls / f.interactions:>7.2f}"
            f" {f.clarifying / f.interactions:>6.2f}"
            f" {'-' if reward is None else f'{reward:+.3f}':>7}  "
            f"{verdict.status if verdict else 'first checkpoint'}"
        )
    rejected = [d for d in rounds.decisions if d.status != PROMOTED]
    for d in rejected:
        print(f"  {d.checkpoint_id} rejected: {'; '.join(d.reasons)}")
    print_candidate_evals(rounds.decisions)
    if rounds.truths:
        print_truth(rounds)
    if rounds.clock.complete():
        print("cycle time (s, wall): first user served -> the next checkpoint serving")
        print(rounds.clock.table())


WATCHED = ("invalid_tool_call_rate", "clarifying_rate", "edit_rate")


def print_candidate_evals(decisions: list[CheckpointInfo]) -> None:
    """Each candidate's behaviour rates against its parent's, on the same eval prompts: where a
    reward hack shows before any user sees the candidate."""
    rows = [(d, {t["metric"]: t for t in d.evals.get("candidate_evals", [])}) for d in decisions]
    if not any(tests for _, tests in rows):
        return
    print("candidate evals (parent -> candidate on the same prompts; ! an alarm):")
    for d, tests in rows:
        cells = [
            f"{m} {t['parent']:.3f} -> {t['candidate']:.3f}{' !' if t['alarm'] else ''}"
            for m in WATCHED
            if (t := tests.get(m)) is not None
        ]
        print(f"  {d.checkpoint_id:<11} " + ", ".join(cells))


def print_truth(rounds: TrainingRounds) -> None:
    """Each gate decision beside the candidate's true gain (which the simulator alone knows):
    better or worse when the gain is more than twice its standard error from 0."""
    print("gate decisions against the truth (true expected reward, candidate minus parent):")
    tally: dict[str, list[int]] = {"better": [0, 0], "worse": [0, 0], "no different": [0, 0]}
    for d in rounds.decisions:
        if d.parent is None or d.checkpoint_id not in rounds.truths:
            continue
        cand, parent = rounds.truths[d.checkpoint_id], rounds.truths[d.parent]
        gain = cand.reward - parent.reward
        se = (cand.reward_stderr**2 + parent.reward_stderr**2) ** 0.5
        kind = "better" if gain > 2 * se else "worse" if gain < -2 * se else "no different"
        tally[kind][0] += d.status == PROMOTED
        tally[kind][1] += 1
        print(
            f"  {d.checkpoint_id:<11} true gain {gain:+.3f} (se {se:.3f}, {kind}); invalid calls"
            f" {parent.invalid:.2f} -> {cand.invalid:.2f}, questions {parent.clarifying:.2f} -> "
            f"{cand.clarifying:.2f}: {d.status}"
        )
    print(
        "  promoted: "
        + ", ".join(f"{k} {promoted} of {n}" for k, (promoted, n) in tally.items() if n)
    )


def settle(seconds: float) -> None:
    log.info("waiting %.0fs for the windows and their late periods to close", seconds)
    time.sleep(seconds)
