"""What `rtrl run` leaves for a person and a script to look at: `summary.json` (the rounds,
every gate decision, the cycle times, the closing A/B's metrics; ``rtrl.report.summary``), the
rounds' plot and `report.html`, which renders the summary and every plot the run drew
(``rtrl.report.page``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from matplotlib.figure import Figure

from rewards.figures import save_figure
from rtrl.report.page import Plot, render, write
from rtrl.report.summary import (
    WAITING,
    AbTest,
    Metric,
    Round,
    RunSummary,
    checkpoint,
    cycles,
    read_summary,
    write_summary,
)
from rtrl.run.clock import STAGES

if TYPE_CHECKING:
    from rtrl.run.rounds import TrainingRounds
    from rtrl.worlds.agent_world import ClosingRuns
    from warehouse.report import ReportRow

SOLVED_METRIC = "tasks_solved_per_interaction"
"""The agent world's primary metric: first among its closing A/B's metrics in `summary.json`."""


def round_rows(rounds: TrainingRounds, measured: dict[str, float]) -> list[Round]:
    """Round i is served by ``figures[i]``; the candidate trained on its data is
    ``decisions[i]`` (the last round has none: nothing trains after it; a round whose
    held-out evidence was below the gate's minimums has ``WAITING``)."""
    rows = []
    code = rounds.world in ("code", "agent")
    agent = rounds.world == "agent"
    for i, f in enumerate(rounds.figures):
        decision = rounds.decisions[i] if i < len(rounds.decisions) else None
        waiting = WAITING if decision is None and i < len(rounds.decisions) else None
        held_out = rounds.held_out.get(f.checkpoint_id)
        n = f.interactions
        broken = f.broken_tool_calls / f.tool_calls if f.tool_calls else 0.0
        rows.append(
            Round(
                round=i + 1,
                served_by=f.checkpoint_id,
                users=f.interactions,
                accepted_share=f.accepted / f.interactions,
                invalid_tool_call_share=f.invalid_tool_calls / f.interactions,
                question_share=f.clarifying / f.interactions,
                taste=f.taste,
                mean_reward=measured.get(f.checkpoint_id),
                candidate=decision.checkpoint_id if decision else None,
                gate_decision=decision.status if decision else waiting,
                pass_share=f.passed / n if code else None,
                edits_kept_share=f.kept / n if code else None,
                dissatisfied_share=f.dissatisfied / n if code else None,
                held_out_pass_rate=held_out.rate if held_out else None,
                held_out_answers=held_out.n if held_out else None,
                tool_calls=f.tool_calls if agent else None,
                broken_tool_call_share=broken if agent else None,
                rollouts_refused=rounds.refused[i] if i < len(rounds.refused) else None,
            )
        )
    return rows


def ab_tests(experiment: str, closing: bool, rows: Sequence[ReportRow]) -> list[AbTest]:
    """The A/B report's rows, one test per treatment arm, with the metrics' stable names."""
    from warehouse.report import METRICS

    tests = []
    for arm in sorted({r.arm for r in rows}):
        mine = [r for r in rows if r.arm == arm]
        metrics = [Metric(name=r.metric, label=METRICS[r.metric][0], control=r.control,
                          treatment=r.value, change=r.relative_change, ci_low=r.ci_low,
                          ci_high=r.ci_high, p=r.p_value) for r in mine]  # fmt: skip
        tests.append(AbTest(experiment=experiment, closing=closing, control_arm=mine[0].control_arm,
                            treatment_arm=arm, n_users=mine[0].n_users,
                            n_interactions=mine[0].n_interactions, metrics=metrics))  # fmt: skip
    return tests


def solved_metric(truth: ClosingRuns, test: AbTest) -> Metric:
    """The agent world's primary metric in its closing A/B, by the world's truth (the hidden
    tests on the repository each run left; ``rtrl.worlds.agent_ab``), its interval at the
    bound of the look the test stopped at."""
    from rtrl.worlds.agent_ab import solved_change
    from rtrl.worlds.agent_world import arm_of

    look = truth.look
    z = {"z": look.bound} if look is not None else {}  # and its p-value: the look's
    ch = solved_change(((arm_of(o), o.user_id, o.solved) for o in truth.runs), test.control_arm,
                       test.treatment_arm, **z)  # fmt: skip
    where = f"; look {look.look} of {look.looks}, |z| bound {look.bound:.3f}" if look else ""
    label = f"tasks solved per interaction (the hidden tests{where})"
    return Metric(name=SOLVED_METRIC, label=label,
                  control=ch.control, treatment=ch.treatment, change=ch.relative,
                  ci_low=ch.ci_low, ci_high=ch.ci_high,
                  p=look.p_value if look is not None else ch.p_value)  # fmt: skip


def build_summary(rounds: TrainingRounds, rows: list[Round], experiment: str, closing: bool,
                  ab: Sequence[ReportRow], closing_s: dict[str, float] | None = None,
                  loop_s: float | None = None) -> RunSummary:  # fmt: skip
    """The run's summary from the rounds, the checkpoint registry and the A/B report;
    ``closing_s``: the closing A/B's wall seconds by layout, ``loop_s``: the run's."""
    held = {c: (r.rate, r.n) for c, r in rounds.held_out.items()}
    lineage = [checkpoint(c.checkpoint_id, c.parent, c.status, c.reasons, c.evals.get("gate", {}),
                          held.get(c.checkpoint_id))
               for c in rounds.registry.list()]  # fmt: skip
    tests = ab_tests(experiment, closing, ab)
    if closing and rounds.closing_runs.runs:
        tests = [t.model_copy(update={"metrics": [solved_metric(rounds.closing_runs, t),
                                                  *t.metrics]}) for t in tests]  # fmt: skip
    return RunSummary(
        world=rounds.world if rounds.world in ("code", "agent") else "tokens",  # type: ignore[arg-type]
        rounds=rows,
        checkpoints=lineage,
        ab=tests,
        cycles=cycles(rounds.clock.complete()),
        stage_names=list(STAGES),
        settle_share=rounds.clock.share("settle"),
        loop_s=loop_s,
        closing_ab_s=closing_s,
    )


def plot_rounds(rows: list[Round], path: Path) -> Path:
    """Per round: the users' hidden taste of the served policy and what they accepted (in the
    code world: code passing the hidden tests, edits kept, the held-out pass rate), and the
    mean reward the platform measured."""
    fig = Figure(figsize=(max(4.5, 0.8 * len(rows) + 2.5), 3.6))
    ax = fig.add_subplot()
    x = [r.round for r in rows]
    if rows[0].pass_share is None:
        ax.plot(x, [r.taste for r in rows], "o-", label="hidden taste of the served policy")
        ax.plot(x, [r.accepted_share for r in rows], "s--", label="accepted edits")
    else:  # the code and agent worlds: the hidden tests' verdicts (and the held-out tasks)
        agent = rows[0].broken_tool_call_share is not None
        solved = "tasks solved" if agent else "code passing the hidden tests"
        ax.plot(x, [r.pass_share or 0.0 for r in rows], "o-", label=solved)
        ax.plot(x, [r.edits_kept_share or 0.0 for r in rows], "s--", label="edits kept")
        if agent:
            ax.plot(x, [r.broken_tool_call_share or 0.0 for r in rows], "x:",
                    label="broken tool calls (of all calls)")  # fmt: skip
        held = [(r.round, r.held_out_pass_rate) for r in rows if r.held_out_pass_rate is not None]
        if held:
            ax.plot(*zip(*held, strict=True), "D-.", label="held-out pass rate")
    rewards = [(r.round, r.mean_reward) for r in rows if r.mean_reward is not None]
    if rewards:
        ax2 = ax.twinx()
        ax2.plot(*zip(*rewards, strict=True), "^:", color="tab:green", label="mean reward")
        ax2.set_ylabel("mean reward (rewards mart)")
        ax2.legend(loc="lower right", fontsize="small")
    ax.set_xticks(x, [f"{r.round}\n{r.served_by}" for r in rows], fontsize="small")
    ax.set_xlabel("round, served by")
    ax.set_ylabel("share")
    ax.set_title("training rounds")
    ax.legend(loc="upper left", fontsize="small")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return save_figure(fig, path)


def write_report(root: Path, rounds: TrainingRounds, db: Path, experiment: str,
                 ab_plot: str = "ab.svg", closing: bool = False,
                 closing_s: dict[str, float] | None = None,
                 loop_s: float | None = None) -> Path:  # fmt: skip
    """``root/summary.json`` and ``root/report.html`` with the rounds, the A/B report of
    ``experiment`` (``closing``: the run's closing A/B test) and the plots that are in ``root``
    (``ab_plot``, checkpoints.svg, and rounds.svg drawn here). The page renders the summary as
    read back from its file: what a script reads is what the page shows."""
    import duckdb

    from warehouse.report import ab_report
    from warehouse.store import Store

    with duckdb.connect(str(db), read_only=True) as con:
        measured = dict(
            con.sql(
                "SELECT checkpoint_id, avg(reward) FROM rewards WHERE status = 'scored' GROUP BY 1"
            ).fetchall()
        )
    rows = round_rows(rounds, measured)
    plots = []
    if rows:
        plot_rounds(rows, root / "rounds.svg")
        plots.append(Plot("Training rounds", "rounds.svg", "the served policy, round by round"))
    for name, title, caption in (
        (ab_plot, "A/B report", f"relative change per metric of {experiment}, 95 % CI"),
        (
            "checkpoints.svg",
            "Reward by checkpoint",
            "measured (95 % CI) beside the gate's estimate",
        ),
    ):
        if (root / name).is_file():
            plots.append(Plot(title, name, caption))
    ab = ab_report(Store(str(root / "warehouse")), experiment, db=str(db))
    summary_file = write_summary(root / "summary.json",
                                 build_summary(rounds, rows, experiment, closing, ab,
                                               closing_s, loop_s))  # fmt: skip
    return write(root / "report.html", render("rtrl run", read_summary(summary_file), plots))
