"""What `rtrl train --watch --metrics-port P` tells a scraper (and the live page): the phase the
service is in (idle: nothing new to train on; waiting: new batches, not yet enough held-out
evidence for the gate; training: a round in progress; stopping), the evidence a waiting round
has against what the gate needs, and every round's outcome (promoted, canary, rejected, given
up for a passing failure, stopped by SIGTERM, refused for its data). A trainer that died shows
as a target that stopped answering, or a start time that moved (``process_start_time_seconds``).
"""

from __future__ import annotations

from prometheus_client import Counter, Enum, Gauge

from infra.metrics import ServiceMetrics

PHASES = ("starting", "idle", "waiting", "training", "stopping")
OUTCOMES = ("promoted", "canary", "rejected", "given_up", "stopped", "refused")


class TrainerMetrics(ServiceMetrics):
    def __init__(self) -> None:
        super().__init__()
        r = self.registry
        self.phase = Enum("rtrl_trainer_phase", "what the trainer service is doing",
                          states=list(PHASES), registry=r)  # fmt: skip
        self.evidence = Gauge(
            "rtrl_trainer_evidence",
            "a waiting round's held-out evidence: runs with a reward and users, what it has and "
            "what the gate needs",
            ["what", "of"],
            registry=r,
        )
        self.rounds = Counter("rtrl_trainer_rounds", "rounds by outcome", ["outcome"],
                              registry=r)  # fmt: skip
        self.round_seconds = Gauge("rtrl_trainer_last_round_seconds",
                                   "wall seconds of the last round that trained",
                                   registry=r)  # fmt: skip
        self.phase.state("starting")
        for outcome in OUTCOMES:
            self.rounds.labels(outcome)

    def waiting(self, runs: int, users: int, need_runs: int, need_users: int) -> None:
        self.phase.state("waiting")
        for what, have, need in (("runs", runs, need_runs), ("users", users, need_users)):
            self.evidence.labels(what, "have").set(have)
            self.evidence.labels(what, "need").set(need)
