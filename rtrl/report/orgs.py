"""The orgs world's figures (`rtrl run --world orgs`): per organisation and round, what its users
got and its line's gate decision; per organisation, its closing A/B. Printed as a table and kept
as ``orgs.json``."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from rtrl.worlds.org_world import move_text, share_text

if TYPE_CHECKING:
    from rtrl.run.org_rounds import OrgRounds


def print_org_rounds(rounds: OrgRounds) -> None:
    """Each organisation's rounds, then each closing A/B's convention rate per arm."""
    print("orgs world: each organisation's rounds (convention met: share of its edits in the "
          "form its users ask for; none: the share written after prose)")  # fmt: skip
    print(f"  {'org':<8} {'conv.':<9} {'round':>5} {'served by':<14} {'users':>5} "
          f"{'conv. met':>9} {'passed':>6} {'kept':>5} {'dissat.':>7}  gate")  # fmt: skip
    for line in rounds.lines:
        for r in line.rounds:
            t = r.tally
            gate = r.decision if r.candidate is None else f"{r.candidate} {r.decision}"
            print(f"  {r.org:<8} {line.spec.convention or 'none':<9} {r.number:>5} "
                  f"{r.checkpoint_id:<14} {t.answers:>5} {share_text(t.share('followed')):>9} "
                  f"{share_text(t.share('passed')):>6} {share_text(t.share('kept')):>5} "
                  f"{share_text(t.share('dissatisfied')):>7}  {gate}")  # fmt: skip
    for ab in rounds.closing:
        print(f"closing A/B, {ab.org}: {ab.control} (control) against {ab.treatment}: "
              f"{move_text(ab.convention)} (95 %, users as clusters); answers per arm "
              f"{ {arm: t.answers for arm, t in ab.arms.items()} }")  # fmt: skip


def org_summary(rounds: OrgRounds, reports: dict[str, Any], loop_s: float) -> dict[str, Any]:
    """The run's figures for scripts: every organisation's rounds and closing A/B (with the
    warehouse's report of it), and the run's wall time."""
    return {
        "world": "orgs",
        "loop_s": round(loop_s, 1),
        "shared": rounds.shared,
        "orgs": [
            {
                "org": line.spec.name,
                "convention": line.spec.convention,
                "users_per_round": line.users,
                "rounds": [
                    {
                        **asdict(r),
                        "tally": asdict(r.tally),
                        "convention_met": r.tally.share("followed"),
                    }
                    for r in line.rounds
                ],  # fmt: skip
            }
            for line in rounds.lines
        ],
        "closing": [
            {
                "org": ab.org,
                "control": ab.control,
                "treatment": ab.treatment,
                "seconds": round(ab.seconds, 1),
                "convention_met": None
                if ab.convention is None
                else {**asdict(ab.convention), "difference": ab.convention.difference},
                "arms": {arm: asdict(t) for arm, t in ab.arms.items()},
                "report": reports.get(ab.org),
            }
            for ab in rounds.closing
        ],
        "cycles": rounds.clock.cycles,
    }
