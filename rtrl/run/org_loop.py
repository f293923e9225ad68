"""`rtrl run --world orgs`: the loop with a checkpoint line per organisation.

Three organisations of unequal size (``rtrl.worlds.org_world.ORGS``) ask SmolLM2 for the same
easy tasks through API keys of their own; two hold conventions that conflict, the third none.
Each round serves every organisation by its own line's promoted checkpoint (the shared one at
first), lands the round, and trains each organisation's line on its own users only, gated on its
own held-out users with its own alpha. The closing A/B per organisation puts its last promoted
checkpoint against the shared one, on its own users: the warehouse's report (`rtrl report ab
--org`) and the convention's rate per arm. The figures go to ``orgs.json`` under the run's
folder.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rtrl.run.ingest_stages import create_keys, start_ingest
from rtrl.run.landing import Landing
from rtrl.run.procs import Stage, run_stage
from rtrl.worlds.org_world import ORGS

if TYPE_CHECKING:
    from rtrl.run.org_rounds import OrgRounds
    from rtrl.run.settings import RunPlan

log = logging.getLogger("rtrl.run")


@dataclass(frozen=True)
class OrgRun:
    """What the run started before the world's loop: its plan and folder, the broker, the run's
    id (its topics' prefix), the reward configuration, the stages to stop, and timing."""

    plan: RunPlan
    root: Path
    bootstrap: str
    run_id: str
    reward_config: Path
    stages: list[Stage]
    started: float
    settle_s: int

    @property
    def kafka(self) -> list[str]:
        return ["--bootstrap", self.bootstrap, "--topic-prefix", f"{self.run_id}."]


def run_orgs(run: OrgRun) -> int:
    """The orgs world's loop (the module's docstring); 0 once it ran to its end."""
    from rtrl.run.rounds import register_root

    plan, settings, logs = run.plan, run.plan.settings, run.root / "logs"
    keys = create_keys(run.root / "keys.db", [o.name for o in ORGS], logs / "keys.log")
    start_ingest(run.root, run.kafka, settings.collector_port, run.run_id, run.reward_config,
                 run.stages)  # fmt: skip
    root_id = register_root(run.root, plan.model, run.kafka)
    rounds: OrgRounds = _org_rounds(run, keys, root_id)
    landing = Landing(run.kafka, run.root / "warehouse", run.run_id, logs, run.settle_s)
    try:
        rounds.start(root_id)
        for number in range(1, plan.rounds + 1):
            rounds.play(number, settings.seed)
            landing.land(rounds.clock, rounds.deliver_rollouts, rounds.played_until)
            rounds.train(landing.warehouse)
        if plan.rounds and plan.ab_users:
            rounds.play_closing(plan.ab_users, settings.seed)
    finally:
        rounds.close()
    if rounds.closing:
        landing.land(rounds.clock, lambda: None, rounds.played_until)
    reports = {ab.org: _ab_report(landing, ab.org, run.root) for ab in rounds.closing}
    from rtrl.report.orgs import org_summary, print_org_rounds

    print_org_rounds(rounds)
    summary = org_summary(rounds, reports, time.monotonic() - run.started)
    (run.root / "orgs.json").write_text(json.dumps(summary, indent=2))
    log.info("orgs world done in %.0fs; its figures: %s", time.monotonic() - run.started,
             run.root / "orgs.json")  # fmt: skip
    return 0


def _org_rounds(run: OrgRun, keys: dict[str, str], root_id: str) -> OrgRounds:
    """The world's organisations, each with its key, SDK and users a round, and one gateway."""
    from ingest.sdk import SdkConfig
    from rtrl.run.gateway import GatewaySetup
    from rtrl.run.org_rounds import OrgLine, OrgRounds

    plan, settings = run.plan, run.plan.settings
    endpoint = f"http://127.0.0.1:{settings.collector_port}"
    lines = [OrgLine(spec, spec.users(plan.round_users),
                     SdkConfig(endpoint=endpoint, api_key=keys[spec.name], org_id=spec.name,
                               spool_path=run.root / f"sdk-{spec.name}.db"), root_id)
             for spec in ORGS]  # fmt: skip
    setup = GatewaySetup(str(run.root / "checkpoints"), str(run.root / "keys.db"), run.kafka,
                         settings.gateway_port, keys[ORGS[0].name], settings.seed, 900.0,
                         tuple(plan.serve_args()))  # fmt: skip
    train_args = (*plan.code.train_args(), "--eval-reader", "harness", "--reward-config",
                  str(run.reward_config), *plan.train_options())  # fmt: skip
    return OrgRounds(run.root, run.kafka, lines, setup, plan.code, train_args,
                     plan.evals_engine())  # fmt: skip


def _ab_report(landing: Landing, org: str, root: Path) -> dict:
    """The warehouse's A/B report of ``org``'s closing experiment, on its own users: printed,
    its plot written, and its figures returned (`rtrl report ab --org --format json`)."""
    from rtrl.run.org_rounds import AB_PREFIX

    base = ["report", "ab", "--warehouse", str(landing.warehouse), "--experiment",
            AB_PREFIX + org, "--org", org]  # fmt: skip
    log_file = landing.logs / "report.log"
    print(run_stage("report", [*base, "--plot", str(root / f"final_ab_{org}.svg")], log_file),
          end="")  # fmt: skip
    return json.loads(run_stage("report", [*base, "--format", "json"], log_file))
