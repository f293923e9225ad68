"""A round's advantages: how much better than expected each example's reward was, the signal
the update's PPO loss multiplies (``trainer.learner``).

Completions that share a prompt are normalised within their group (GRPO); a completion alone
with its prompt is compared with a running baseline of earlier rewards (its mean and spread
carried from round to round in the checkpoint, :func:`next_baseline`). Either is divided by its
spread floored at ``adv_std_floor``, so a group or a baseline whose rewards were all equal
cannot turn a small difference into a huge advantage (:func:`advantages`). The unit is the
trajectory: an agent run's calls share one reward and count once (:func:`trajectory_advantages`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from models.examples import Example, trajectories
from trainer.learner_config import LearnerConfig, _finite


def advantages(
    prompts: Sequence[tuple[int, ...]],
    rewards: Sequence[float],
    baseline: dict[str, float],
    std_floor: float = LearnerConfig.adv_std_floor,
) -> tuple[list[float], dict[str, float], float]:
    """Per example: group-normalised when it shares its prompt with others (GRPO), else its
    reward against the running ``baseline`` (``{"mean", "var"}``; empty before the first
    batch). Returns the advantages, the baseline to use next (decay applied by the caller) and
    this batch's singleton mean.

    Every spread is floored at ``std_floor`` (reward units) before it divides: a round whose
    single-sample prompts all earned the same reward leaves a running variance of 0, and the
    next round's advantages would otherwise be the reward differences times 1e6. So
    ``|advantage| <= |reward - mean| / std_floor`` always, and within a group of ``n`` also
    ``<= sqrt(n - 1)``.

    >>> adv, _, _ = advantages([(1,), (1,), (2,)], [1.0, 0.0, 0.5], {"mean": 0.25, "var": 0.0625})
    >>> [round(a, 3) for a in adv]
    [1.0, -1.0, 1.0]
    >>> advantages([(2,)], [1.0], {"mean": 0.5, "var": 0.0}, std_floor=0.1)[0]  # not 5e5
    [5.0]
    """
    scales, batch, singles_mean = _normalisers(prompts, rewards, baseline, std_floor)
    out = [(r - centre) / spread for r, (centre, spread) in zip(rewards, scales, strict=True)]
    return out, batch, singles_mean


def _normalisers(
    prompts: Sequence[tuple[int, ...]],
    rewards: Sequence[float],
    baseline: dict[str, float],
    std_floor: float,
) -> tuple[list[tuple[float, float]], dict[str, float], float]:
    """Per example the (centre, spread) its advantage is taken against (:func:`advantages`)."""
    if not _finite(std_floor) or std_floor <= 0:
        raise ValueError(f"std_floor must be a finite number > 0, got {std_floor!r}")
    groups: dict[tuple[int, ...], list[int]] = {}
    for index, prompt in enumerate(prompts):
        groups.setdefault(tuple(prompt), []).append(index)
    out = [(0.0, 1.0)] * len(rewards)
    singles = [members[0] for members in groups.values() if len(members) == 1]
    for members in groups.values():
        if len(members) > 1:
            values = torch.tensor([rewards[i] for i in members], dtype=torch.float64)
            spread = max(float(values.std(unbiased=False)), std_floor)
            for i in members:
                out[i] = (float(values.mean()), spread)
    single_rewards = torch.tensor([rewards[i] for i in singles], dtype=torch.float64)
    if singles:
        mean = baseline.get("mean", float(single_rewards.mean()))
        var = baseline.get("var", float(single_rewards.var(unbiased=False)))
        spread = max(math.sqrt(max(var, 0.0)), std_floor)
        for i in singles:
            out[i] = (mean, spread)
    batch = ({"mean": float(single_rewards.mean()), "var": float(single_rewards.var(
        unbiased=False))} if singles else {})  # fmt: skip
    return out, batch, float(single_rewards.mean()) if singles else 0.0


def trajectory_advantages(
    examples: Sequence[Example], baseline: dict[str, float], std_floor: float
) -> tuple[list[float], dict[str, float]]:
    """Per example (one call of an agent run, or a single answer): its advantage, and the
    batch's baseline statistics (:func:`advantages`).

    The unit is the trajectory: the calls of one interaction (``rollout.turn`` set) share one
    reward, so trajectories, not calls, are grouped by their first prompt (GRPO) or compared with
    the running baseline, and a run of twenty calls counts once in the baseline, as a single
    answer does. Each call's advantage is its credited reward (``Example.credited``: the
    trajectory's reward less the broken-call terms of the turns before it) against its
    trajectory's centre and spread, so a broken call lowers its own turn's advantage and its
    ancestors', never a later turn's. A single answer is its own trajectory, with exactly
    :func:`advantages`' value.

    >>> from types import SimpleNamespace as NS
    >>> def call(i, parent, prompt, credited):
    ...     turn = NS(call_id=f"c{i}", parent_call_id=parent)
    ...     return NS(rollout=NS(interaction_id="run", turn=turn, prompt_ids=prompt),
    ...               reward=-1.0, scored=-1.0, credited=credited)
    >>> run = [call(1, None, (1,), -1.0), call(2, "c1", (1, 5), -0.5)]
    >>> trajectory_advantages(run, {"mean": 0.0, "var": 1.0}, 0.1)[0]
    [-1.0, -0.5]
    """
    groups = trajectories(examples)
    roots = [_root(examples, group) for group in groups]
    scales, batch, _ = _normalisers(
        [tuple(examples[i].rollout.prompt_ids) for i in roots],
        [examples[i].scored for i in roots],
        baseline,
        std_floor,
    )
    out = [0.0] * len(examples)
    for group, (centre, spread) in zip(groups, scales, strict=True):
        for i in group:
            out[i] = (float(examples[i].credited) - centre) / spread
    return out, batch


def _root(examples: Sequence[Example], group: list[int]) -> int:
    """The first call of a trajectory: one without a parent, else its shortest prompt."""

    def order(i: int) -> tuple[bool, int]:
        turn = examples[i].rollout.turn
        return turn is not None and turn.parent_call_id is not None, len(
            examples[i].rollout.prompt_ids
        )

    return min(group, key=order)


def next_baseline(old: dict[str, float], batch: dict[str, float], decay: float) -> dict[str, float]:
    if not batch:
        return dict(old)
    if not old:
        return dict(batch)
    return {k: decay * old[k] + (1 - decay) * batch[k] for k in ("mean", "var")}
