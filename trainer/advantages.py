"""A round's advantages: how much better than the other runs of its task each run did, the
signal the update's PPO loss multiplies (``trainer.learner``).

The unit is the run: the calls of one agent interaction (``rollout.turn`` set) share one reward
and one advantage, and a single answer is a run of one call (``models.examples.trajectories``).
Runs are grouped by their task: the first prompt of the run, token for token (every user given
the same task in the same world sees the same prompt). Within a group of ``n >= 2`` runs a run's
advantage is its reward less the mean of the *other* runs' rewards (a leave-one-out baseline),
divided by a constant (``LearnerConfig.adv_scale``, in reward units):

    A_i = (r_i - mean_{j != i} r_j) / scale

No spread enters the scale, so no run's own reward can shrink or blow up its own advantage: a
group whose rewards were all equal gives zeros, however small its spread; a solved run among
failures gets ``(r_solved - r_failed) / scale``, a bounded positive number. A run alone with its
task has nothing to be compared with and gets 0: no learning signal (a running baseline across
tasks would credit it with how hard its task is, not with what it did).

There is no per-turn credit: every sampled token of every call of a run carries the run's
advantage (the environment's tokens carry no loss at all, ``models.scoring``). Crediting a
call with the run's reward less the broken-call terms of earlier turns, divided by a spread of
whole-run rewards, gave the prose answer after a broken call +5.0 in a group of four runs that
all scored the same (``tests/trainer/test_run_advantages.py``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from models.examples import Example, trajectories


def leave_one_out(rewards: Sequence[float], scale: float) -> list[float]:
    """Each reward against the mean of the others, divided by ``scale``; zeros for a group of
    one.

    >>> leave_one_out([1.9, -1.1, -1.1, -1.1], 1.0)
    [3.0, -1.0, -1.0, -1.0]
    >>> leave_one_out([-1.6, -1.6, -1.6, -1.6], 1.0), leave_one_out([2.0], 1.0)
    ([0.0, 0.0, 0.0, 0.0], [0.0])
    """
    if not scale > 0 or scale == float("inf"):
        raise ValueError(f"the advantage scale must be a finite number > 0, got {scale!r}")
    n = len(rewards)
    if n < 2:
        return [0.0] * n
    # the mean of the differences, not the difference of the means: equal rewards give exact
    # zeros (-6.4 less -1.6 is not -4.8 in floating point)
    return [math.fsum(r - o for o in rewards) / (n - 1) / scale for r in rewards]


def task_of(examples: Sequence[Example], run: list[int]) -> tuple[int, ...]:
    """The key of a run's group: its first call's prompt (one without a parent call, else the
    shortest prompt of the run)."""

    def order(i: int) -> tuple[bool, int]:
        turn = examples[i].rollout.turn
        return turn is not None and turn.parent_call_id is not None, len(
            examples[i].rollout.prompt_ids
        )

    return tuple(examples[min(run, key=order)].rollout.prompt_ids)


def run_advantages(examples: Sequence[Example], scale: float) -> list[float]:
    """Per example (a call of a run, or a single answer): its run's advantage (the module's
    rule). Every call of a run gets the same value.

    >>> from types import SimpleNamespace as NS
    >>> def call(run, i, prompt, reward):
    ...     turn = NS(call_id=f"{run}{i}", parent_call_id=None if i == 1 else f"{run}1")
    ...     return NS(rollout=NS(interaction_id=run, turn=turn, prompt_ids=prompt), scored=reward,
    ...               org_id="o")
    >>> calls = [call("a", 1, (7,), 1.0), call("a", 2, (7, 8), 1.0), call("b", 1, (7,), 0.0),
    ...          call("c", 1, (9,), 5.0)]
    >>> run_advantages(calls, 1.0)
    [1.0, 1.0, -1.0, 0.0]
    """
    runs = trajectories(examples)
    groups: dict[tuple[int, ...], list[int]] = {}
    for k, run in enumerate(runs):
        groups.setdefault(task_of(examples, run), []).append(k)
    out = [0.0] * len(examples)
    for members in groups.values():
        rewards = [examples[runs[k][0]].scored for k in members]
        for k, value in zip(members, leave_one_out(rewards, scale), strict=True):
            for i in runs[k]:
                out[i] = value
    return out
