"""What `rtrl run` prints of its training rounds: per round what the users did and the gate
decided, the candidate evals, and (the simulator's knowledge, never trained on) each decision
beside the truth: the token users' true expected reward, or the code world's held-out pass
rate."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from checkpoints.record import PROMOTED, CheckpointInfo
from rtrl.worlds.code_world import rate_text

if TYPE_CHECKING:
    from rtrl.run.rounds import TrainingRounds
    from rtrl.worlds.token_world import RoundFigures


def print_summary(rounds: TrainingRounds, db: Path) -> None:
    """Per served checkpoint: what the users' taste says, and what the platform measured."""
    import duckdb

    with duckdb.connect(str(db), read_only=True) as con:
        measured = dict(
            con.sql(
                "SELECT checkpoint_id, avg(reward) FROM rewards WHERE status = 'scored' GROUP BY 1"
            ).fetchall()
        )
    if rounds.world == "code":
        print_code_rounds(rounds, measured)
        return
    if rounds.world == "agent":
        print_agent_rounds(rounds, measured)
        return
    verdicts = {d.checkpoint_id: d for d in rounds.judged}
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
    rejected = [d for d in rounds.judged if d.status != PROMOTED]
    for d in rejected:
        print(f"  {d.checkpoint_id} rejected: {'; '.join(d.reasons)}")
    print_candidate_evals(rounds.judged)
    if rounds.truths:
        print_truth(rounds)
    if rounds.clock.complete():
        print("cycle time (s, wall): first user served -> the next checkpoint serving")
        print(rounds.clock.table())


def print_code_rounds(rounds: TrainingRounds, measured: dict[str, float]) -> None:
    """The code world's rounds: what the users' code did under the hidden tests, the reward the
    platform measured, the served checkpoint's held-out pass rate, and the gate's decision on
    the candidate trained on the round."""
    print("training rounds (code world: users ask for easy tasks; held-out: pass rate on tasks "
          "no user asks, never trained on):")  # fmt: skip
    print(f"  {'round':>5} {'served by':<15} {'users':>5} {'passed':>6} {'kept':>5} "
          f"{'dissat':>6} {'reward':>7} {'held-out':<16} candidate")  # fmt: skip
    for i, f, reward, candidate in _round_rows(rounds, measured):
        n = f.interactions
        print(f"  {i:>5} {f.checkpoint_id:<15} {n:>5} {f.passed / n:>6.2f} {f.kept / n:>5.2f} "
              f"{f.dissatisfied / n:>6.2f} {reward:>7} "
              f"{rate_text(rounds.held_out.get(f.checkpoint_id)):<16} {candidate}")  # fmt: skip
    _print_rejections_and_cycles(rounds)


def print_agent_rounds(rounds: TrainingRounds, measured: dict[str, float]) -> None:
    """The agent world's rounds: tasks solved (the hidden tests pass after the run), edits
    kept, the share of the model's tool calls that were invalid, the reward the platform
    measured, and the gate's decision on the candidate trained on the round."""
    print("training rounds (agent world: each user's agent run on an easy task; broken: "
          "invalid tool calls of all calls):")  # fmt: skip
    print(f"  {'round':>5} {'served by':<15} {'users':>5} {'solved':>6} {'kept':>5} "
          f"{'broken':>13} {'dissat':>6} {'reward':>7}  candidate")  # fmt: skip
    for i, f, reward, candidate in _round_rows(rounds, measured):
        n = f.interactions
        share = f.broken_tool_calls / f.tool_calls if f.tool_calls else 0.0
        broken = f"{share:.2f} ({f.broken_tool_calls}/{f.tool_calls})"
        print(f"  {i:>5} {f.checkpoint_id:<15} {n:>5} {f.passed / n:>6.2f} {f.kept / n:>5.2f} "
              f"{broken:>13} {f.dissatisfied / n:>6.2f} {reward:>7}  {candidate}")  # fmt: skip
    _print_rejections_and_cycles(rounds)


def _round_rows(
    rounds: TrainingRounds, measured: dict[str, float]
) -> Iterator[tuple[int, RoundFigures, str, str]]:
    """Each round of a world's table: its number, its figures, the reward the platform
    measured for its served checkpoint and the candidate trained on it, as the table shows
    them ("-": none; "waiting": its held-out evidence was below the gate's minimums)."""
    for i, f in enumerate(rounds.figures):
        reward = measured.get(f.checkpoint_id)
        decision = rounds.decisions[i] if i < len(rounds.decisions) else None
        if decision is not None:
            candidate = f"{decision.checkpoint_id} {decision.status}"
        else:  # the last round trains nothing; a waiting one's batch carries over
            candidate = "waiting (held-out evidence short)" if i < len(rounds.decisions) else "-"
        yield i + 1, f, "-" if reward is None else f"{reward:+.3f}", candidate


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
    for d in rounds.judged:
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


def _print_rejections_and_cycles(rounds: TrainingRounds) -> None:
    """Why each rejected candidate was rejected, then the cycle-time table (every world's)."""
    for d in rounds.judged:
        if d.status != PROMOTED:
            print(f"  {d.checkpoint_id} rejected: {'; '.join(d.reasons)}")
    if rounds.clock.complete():
        print("cycle time (s, wall): first user served -> the next checkpoint serving")
        print(rounds.clock.table())
