"""Simulated closing A/Bs of the agent world, looked at as `rtrl run` looks at them.

Users are not a textbook's independent runs: each has an ability of their own (a Beta draw
around the arm's rate, so that some solve nearly every task and some nearly none), runs two
tasks, and the tasks differ in difficulty. Each simulated test is read by the A/B's own
estimator (``rtrl.worlds.agent_ab.solved_look``) at each planned look, and stops where the
real one would.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rtrl.worlds.agent_ab import Look, Run, play_in_looks

TASK_SHIFT = (-0.15, 0.0, 0.15)  # three tasks, each this much off the arm's rate
RUNS_PER_USER = 2


@dataclass(frozen=True)
class Arms:
    """The two arms' tasks solved a run, and how far users differ: the Beta's
    ``spread`` is 1 / (a + b + 1), the correlation of one user's runs before the tasks."""

    control: float
    treatment: float
    spread: float = 0.3


def _abilities(rng: np.random.Generator, rate: float, spread: float, n: int) -> np.ndarray:
    size = 1 / spread - 1
    return rng.beta(rate * size, (1 - rate) * size, n)


def simulated_runs(rng: np.random.Generator, arms: Arms, users: int) -> list[Run]:
    """``(arm, user_id, solved)`` of ``users`` users split by a fair coin, two runs each."""
    arm_of = rng.random(users) < 0.5
    rows = []
    for side, rate in (("control", arms.control), ("treatment", arms.treatment)):
        ids = np.flatnonzero(arm_of if side == "treatment" else ~arm_of)
        ability = _abilities(rng, rate, arms.spread, len(ids))
        for user, skill in zip(ids, ability, strict=True):
            for run in range(RUNS_PER_USER):
                shift = TASK_SHIFT[(user * RUNS_PER_USER + run) % len(TASK_SHIFT)]
                solved = rng.random() < min(max(skill + shift, 0.0), 1.0)
                rows.append((side, f"u{user}", bool(solved)))
    rows.sort(key=lambda row: int(row[1][1:]))  # in the users' order, as they are played
    return rows


def staged(rows: Sequence[Run], users: int, bounds: tuple[float, ...]) -> Look:
    """The look a test of ``rows`` (``users`` users, in order) stops at under ``bounds``,
    played as `rtrl run` plays its users (``rtrl.worlds.agent_ab.play_in_looks``)."""
    by_user: dict[str, list[Run]] = {}
    for row in rows:
        by_user.setdefault(row[1], []).append(row)
    order = list(by_user.values())

    def play(start: int, stop: int) -> list[Run]:
        return [row for user in order[start:stop] for row in user]

    return play_in_looks(users, bounds, ("control", "treatment"), play)


def stops(seed: int, arms: Arms, users: int, bounds: tuple[float, ...], tests: int) -> list[Look]:
    """Where each of ``tests`` simulated closing A/Bs stopped."""
    rng = np.random.default_rng(seed)
    return [staged(simulated_runs(rng, arms, users), users, bounds) for _ in range(tests)]
