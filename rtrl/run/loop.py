"""`rtrl run`: the whole loop, locally, on embedded defaults.

One command brings up what a deployment runs — a Kafka broker, the topics, an API key, the
collector, the stream worker, a small policy served from the checkpoint registry — drives it with
a simulated editor plugin through the real SDK, then lands the rewards in the warehouse, builds
the catalog and the quality-gated training batches, and prints the A/B report and the
reward-hacking monitors. Then it closes the loop for ``--rounds`` rounds: simulated users react
to the served policy's edits, the trainer updates it on its batch of rollouts and rewards, the
eval gate decides, and the server switches to the promoted checkpoint. Every stage runs as its
own `rtrl` subcommand, logging to a file under ``--data-dir``.

The reward windows are shortened (``--window-s``) so that the run finishes in a few minutes;
everything else is the production code path.

Three worlds (``--world``). ``code`` (the default, what `make run` shows): users ask SmolLM2-135M,
served by llama.cpp, for real functions (the easy tasks of agent/tasks.toml) and judge the code in
the answer's text by a stated rule: accepted when it runs and defines the function asked for,
kept when it passes the task's hidden tests, reverted a few seconds later when it does not, a
dissatisfied follow-up after a rejected, reverted or missing edit (``rtrl.worlds.code_world``). Each
round then prints the share of code passing the hidden tests, edits kept, dissatisfied
follow-ups, the served checkpoint's pass rate on held-out tasks no user asks for, and the gate's
decision; the closing A/B test uses the same users. Its defaults (``CodeWorldSettings``: rounds,
users per round, answer length, LoRA training) are sized for two CPU cores. ``tokens`` (the tiny
model, and the world of ``--users`` and ``--scenario``): the rounds' users react to the token ids
of the answer, a world in which the tiny model learns in seconds. ``agent``: each user gives a
tool-calling agent (the official openai client against the gateway, with read_file, write_file,
run_tests and finish carried out in a repository of its own, up to ``--agent-calls`` requests
joined by the gateway into one interaction) an easy task; the hidden tests decide keep or revert
by the code world's rule (``rtrl.worlds.agent_world``). Each round prints the tasks solved, edits
kept and the share of broken tool calls.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from infra import broker
from infra.broker_config import ClusterLayout
from infra.kafka_dist import BrokerSetupError, default_cache_root
from infra.lifetime import stop_signals_call
from infra.topics import TopicNames
from infra.topics_apply import apply_topics
from rtrl.run.ingest_stages import create_keys, start_ingest
from rtrl.run.landing import Landing
from rtrl.run.options import add_run_options, run_settings
from rtrl.run.procs import Stage, run_stage
from rtrl.run.settings import RunPlan, RunSettings
from rtrl.worlds.scenarios import SCENARIOS

if TYPE_CHECKING:
    from rewards.config import RewardConfig
    from rtrl.run.gateway import GatewaySetup
    from rtrl.run.rounds import TrainingRounds

log = logging.getLogger("rtrl.run")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="the whole loop, locally: broker, collector, stream, warehouse, report",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_run_options(p)
    p.set_defaults(func=_command)


def _command(args: argparse.Namespace) -> int:
    return run(run_settings(args))


def run(settings: RunSettings) -> int:
    plan = settings.plan()
    refusal = plan.refusal()
    if refusal:
        log.error("%s", refusal)
        return 2
    design = plan.agent_design()
    if design:
        log.info("%s", design)
    root: Path = settings.data_dir.resolve()
    if settings.fresh and root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True, exist_ok=True)
    logs = root / "logs"
    layout = ClusterLayout(root / "kafka", port=settings.port)
    started = time.monotonic()
    try:
        bootstrap = broker.start(layout, default_cache_root(os.environ))
    except BrokerSetupError as exc:
        log.error("cannot start Kafka: %s", exc)
        return 1
    stages: list[Stage] = []
    try:  # SIGTERM stops the run as Ctrl-C does: what it started is stopped, the broker last
        with stop_signals_call(_interrupt):
            return _loop(plan, root, logs, bootstrap, stages, started)
    finally:
        for stage in reversed(stages):
            stage.stop()
        if not settings.keep:
            broker.stop(layout)
            log.info("stopped the broker (use --keep to leave it running)")


def _interrupt(signum: int, _frame: object) -> None:
    """SIGTERM or SIGINT: end the loop where it is, so that ``run``'s ``finally`` stops the
    stages and the broker (a broker runs in a session of its own and would outlive the run)."""
    log.warning("signal %d: stopping the run", signum)
    raise KeyboardInterrupt


def _loop(
    plan: RunPlan,
    root: Path,
    logs: Path,
    bootstrap: str,
    stages: list[Stage],
    started: float,
) -> int:
    settings = plan.settings
    run_id = f"run{int(time.time())}"
    prefix = f"{run_id}."
    apply_topics(bootstrap, TopicNames(prefix), replication=1)

    config_file = root / "reward.json"
    late_s, grace_s = max(5, settings.window_s // 2), 2
    scenario = SCENARIOS[settings.scenario]
    reward = run_reward(plan.reward_config, settings.window_s, late_s, grace_s, scenario.flaw)
    config_file.write_text(reward.model_dump_json(indent=2))
    log.info("reward: %s (%s)", plan.reward_config or "reward spec v1's defaults",
             reward.reward_version)  # fmt: skip
    if scenario.flaw != "none":
        log.warning("scenario %s: the stream scores rewards with the flaw %r", scenario.name,
                    scenario.flaw)  # fmt: skip
    if scenario.world == "agent":
        log.warning("scenario %s: unconstrained agent runs scored by the reward %s; the "
                    "pre-serve tool-opening check watches the candidates", scenario.name,
                    plan.reward_config)  # fmt: skip
    keys_db = root / "keys.db"
    kafka = ["--bootstrap", bootstrap, "--topic-prefix", prefix]
    settle_s = settings.window_s + late_s + grace_s + 8  # a round's windows, late periods, slack
    if plan.world == "orgs":
        from rtrl.run.org_loop import OrgRun, run_orgs

        return run_orgs(OrgRun(plan, root, bootstrap, run_id, config_file, stages, started,
                               settle_s))  # fmt: skip
    org = "acme"
    api_key = create_keys(keys_db, [org], logs / "keys.log")[org]
    start_ingest(root, kafka, settings.collector_port, run_id, config_file, stages)

    from ingest.sdk import SdkConfig
    from rtrl.run.rounds import TrainingRounds  # torch: imported when the loop runs, not for --help
    from rtrl.worlds.editor_sim import emit_workload

    sdk = SdkConfig(
        endpoint=f"http://127.0.0.1:{settings.collector_port}",
        api_key=api_key,
        org_id=org,
        spool_path=root / "sdk-spool.db",
    )
    log.info("editor: emitting %d interactions through the SDK", settings.interactions)
    emit_workload(sdk, settings.interactions, settings.seed, pace_s=10)
    from rtrl.run.gateway import GatewaySetup

    # an answer of the code world is up to --max-tokens long, sampled 16 together on the CPU
    wait_s = 120.0 if plan.world == "tokens" else 900.0
    gateway = GatewaySetup(str(root / "checkpoints"), str(keys_db), kafka, settings.gateway_port,
                           api_key, settings.seed, wait_s, tuple(plan.serve_args()))  # fmt: skip
    rounds = TrainingRounds(
        root,
        bootstrap,
        prefix,
        replace(sdk, spool_path=root / "rl.db"),
        plan.round_users,
        settings.seed,
        plan.model,
        scenario.users
        if scenario.name != "default" and scenario.world == "tokens"
        else settings.users,
        settings.truth_samples,
        scenario.eval_reader,
        # the code world's learner is its own (CodeWorldSettings.learner): a token scenario's,
        # made for the tiny model's token world, would override its learning rate; an agent
        # scenario's learner goes over the agent world's
        (
            *(scenario.train_args() if plan.world == scenario.world else ()),
            "--reward-config",
            str(config_file),
            *plan.train_options(),
        ),
        gateway_setup=gateway,
        world=plan.world,
        code=plan.code,
        agent=plan.agent,
        engine=plan.evals_engine(),
    )
    try:
        if plan.rounds:
            rounds.start()
            rounds.play(1)
        return _land_and_train(plan, root, logs, run_id, kafka, rounds, started, settle_s,
                               gateway)  # fmt: skip
    finally:
        rounds.close()


def run_reward(name: str | None, window_s: int, late_s: int, grace_s: int,
               flaw: str) -> RewardConfig:  # fmt: skip
    """The run's reward configuration: the one ``name`` gives (a shipped name or a file; None:
    reward spec v1's numbers) with the run's short windows and the scenario's flaw, as the
    stream scores it and the trainer reads it (one file, ``reward.json``).

    >>> c = run_reward("agent", 20, 10, 2, "none")
    >>> (c.window_s, c.invalid_tool_call), run_reward(None, 20, 10, 2, "none").invalid_tool_call
    ((20, -0.1), -0.5)
    """
    from rewards.config import RewardConfig, load_config

    base = load_config(name) if name else RewardConfig()
    fields = {**base.model_dump(), "window_s": window_s, "late_s": late_s, "grace_s": grace_s,
              "remember_closed_s": 24 * 3600, "flaw": flaw}  # fmt: skip
    return RewardConfig.model_validate(fields)


def rounds_planned(last: int, rounds: int, extra: int, promoted: bool) -> int:
    """How many rounds of users the run plays, once the candidate of round ``last`` was judged:
    ``rounds``, and one more at a time while nothing has been ``promoted``, up to ``extra``
    more.

    >>> rounds_planned(2, 2, 1, promoted=False), rounds_planned(3, 2, 1, promoted=False)
    (3, 3)
    >>> rounds_planned(2, 2, 1, promoted=True), rounds_planned(2, 2, 0, promoted=False)
    (2, 2)
    """
    return last + 1 if not promoted and last < rounds + extra else last


def _land_and_train(
    plan: RunPlan,
    root: Path,
    logs: Path,
    run_id: str,
    kafka: list[str],
    rounds: TrainingRounds,
    started: float,
    settle_s: int,
    closing: GatewaySetup,
) -> int:
    from rtrl.report.tables import print_summary
    from rtrl.run.ab_round import EXPERIMENT as FINAL_AB
    from rtrl.run.ab_round import play_closing_ab

    warehouse = root / "warehouse"
    wh = ["--warehouse", str(warehouse)]
    landing = Landing(kafka, warehouse, run_id, logs, settle_s)

    def land() -> None:
        landing.land(rounds.clock, rounds.deliver_rollouts, rounds.played_until)

    land()
    print(run_stage("batches", ["batches", "list", *wh], logs / "batches.log"), end="")
    print(
        run_stage(
            "report",
            [
                "report",
                "ab",
                *wh,
                "--experiment",
                "exp-context-window",
                "--plot",
                str(root / "ab.svg"),
            ],
            logs / "report.log",
        ),
        end="",
    )
    log.info("A/B forest plot: %s", root / "ab.svg")
    _print_monitors(warehouse / "warehouse.duckdb", child="ckpt-0003", parent="ckpt-0001")
    # the code world's last checkpoint meets its users in the closing A/B (its treatment arm):
    # a round of users before that would measure it twice, and cost a SmolLM2 run 4 minutes
    last_round_in_ab = plan.world != "tokens" and bool(plan.ab_users)
    root_id, last, number = rounds.serving, plan.rounds, 2
    while number <= last + 1:
        rounds.train(warehouse)
        if number == last + 1:
            promoted = rounds.serving != root_id
            last = rounds_planned(last, plan.rounds, plan.extra_rounds, promoted)
            if number <= last:
                log.info("nothing promoted in %d round(s): round %d (--extra-rounds %d)",
                         number - 1, number, plan.extra_rounds)  # fmt: skip
        if number <= last or not last_round_in_ab:
            rounds.play(number)
            land()
        number += 1
    experiment, ab_plot = "exp-context-window", "ab.svg"
    closing_s = None
    if plan.rounds and plan.ab_users:
        closing_s = play_closing_ab(rounds, closing, root, logs, plan.ab_users,
                                    plan.settings.ab_compare_servers)  # fmt: skip
    if closing_s:
        land()
        experiment, ab_plot = FINAL_AB, "final_ab.svg"
        print(
            run_stage(
                "report",
                ["report", "ab", *wh, "--experiment", FINAL_AB, "--plot", str(root / ab_plot)],
                logs / "report.log",
            ),
            end="",
        )
    if plan.rounds:
        rounds.measure_held_out()  # any checkpoint no users' round or A/B came after
        print_summary(rounds, warehouse / "warehouse.duckdb")
        print(
            run_stage(
                "checkpoints",
                [
                    "checkpoints",
                    "list",
                    "--registry",
                    str(root / "checkpoints"),
                    "--catalog",
                    str(warehouse / "warehouse.duckdb"),
                    "--plot",
                    str(root / "checkpoints.svg"),
                ],
                logs / "train.log",
            ),
            end="",
        )
        log.info("reward by checkpoint: %s", root / "checkpoints.svg")
        from rtrl.report.write import write_report

        page = write_report(root, rounds, warehouse / "warehouse.duckdb", experiment, ab_plot,
                            closing=experiment == FINAL_AB, closing_s=closing_s,
                            loop_s=time.monotonic() - started)  # fmt: skip
        log.info("report page: %s; the run's figures for scripts: %s", page,
                 root / "summary.json")  # fmt: skip
    log.info("loop done in %.0fs; logs and data under %s", time.monotonic() - started, root)
    return 0


def _print_monitors(db: Path, child: str, parent: str) -> None:
    """The reward-hacking monitors of ``child`` against ``parent``, from the rewards mart."""
    import duckdb

    from rewards.monitors import MonitorThresholds, checkpoint_rates, compare

    with duckdb.connect(str(db), read_only=True) as con:
        records = con.sql("select * from rewards").pl()
    rates = checkpoint_rates(records, child), checkpoint_rates(records, parent)
    alarms = compare(*rates, MonitorThresholds())
    print(
        f"monitors: {child} ({rates[0].n_interactions} interactions) against {parent}: "
        f"{len(alarms)} alarm(s)"
    )
    for alarm in alarms:
        print(f"  ALARM {alarm.message}")
