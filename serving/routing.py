"""Which checkpoint serves a request: the followed one, or the arm of an experiment the user is
assigned to.

An assignment is sticky: a user's arm is a pure function of the experiment's name and the user
id (sha256 of both, into 10,000 buckets laid out by the arms' weights), so every gateway replica
puts a user in the same arm, and a restart changes nothing. An arm names a checkpoint, or
``current`` for whatever checkpoint the gateway follows (a canary's parent).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from checkpoints.canary_names import CANARY_ARM, PARENT_ARM, experiment_of
from checkpoints.record import check_checkpoint_id
from models.rollout import Experiment

BUCKETS = 10_000
CURRENT = "current"
_ARM = re.compile(r"(?P<arm>[A-Za-z0-9_.-]{1,64})=(?P<ckpt>[^:]+):(?P<weight>\d+(\.\d+)?)")


@dataclass(frozen=True)
class Arm:
    name: str
    checkpoint: str  # a checkpoint id, or CURRENT
    weight: float


@dataclass(frozen=True)
class Split:
    experiment: str
    arms: tuple[Arm, ...]

    def __post_init__(self) -> None:
        Experiment(self.experiment, "x")  # the events' limits on a name
        if len(self.arms) < 2:
            raise ValueError("an experiment has at least two arms")
        if len({a.name for a in self.arms}) != len(self.arms):
            raise ValueError("arm names must differ")
        if any(a.weight <= 0 for a in self.arms):
            raise ValueError("arm weights are > 0")

    def assign(self, user_id: str) -> Arm:
        """The user's arm: the same for the same user, shares as the weights.

        >>> split = parse_arms("ab", "A=c1:50,B=c2:50")
        >>> split.assign("u-1") == split.assign("u-1")
        True
        """
        digest = hashlib.sha256(f"{self.experiment}\0{user_id}".encode()).digest()
        bucket = int.from_bytes(digest[:8], "big") % BUCKETS
        total = sum(a.weight for a in self.arms)
        edge = 0.0
        for arm in self.arms:
            edge += arm.weight / total * BUCKETS
            if bucket < edge:
                return arm
        return self.arms[-1]

    def checkpoints(self) -> set[str]:
        """The pinned checkpoints the arms name (``current`` is the followed one)."""
        return {a.checkpoint for a in self.arms if a.checkpoint != CURRENT}


def parse_arms(experiment: str, spec: str) -> Split:
    """``--arms A=ckpt1:50,B=ckpt2:50``.

    >>> parse_arms("ab", "A=t-0001:90,B=current:10").arms[1]
    Arm(name='B', checkpoint='current', weight=10.0)
    >>> parse_arms("ab", "A=t-1")
    Traceback (most recent call last):
    ...
    ValueError: --arms: 'A=t-1' is not NAME=CHECKPOINT:WEIGHT
    """
    arms = []
    for part in spec.split(","):
        match = _ARM.fullmatch(part.strip())
        if match is None:
            raise ValueError(f"--arms: {part.strip()!r} is not NAME=CHECKPOINT:WEIGHT")
        ckpt = match["ckpt"]
        if ckpt != CURRENT:
            check_checkpoint_id(ckpt, f"--arms {match['arm']}")
        arms.append(Arm(match["arm"], ckpt, float(match["weight"])))
    return Split(experiment, tuple(arms))


def canary(candidate: str, percent: float) -> Split:
    """The canary split of the gate: ``percent`` of users on ``candidate``, the rest on the
    followed checkpoint (its parent), as experiment ``canary-<candidate>``.

    >>> [(a.name, a.checkpoint, a.weight) for a in canary("t-0002", 10).arms]
    [('parent', 'current', 90.0), ('canary', 't-0002', 10.0)]
    """
    if not 0 < percent < 100:
        raise ValueError(f"--canary: a share strictly between 0 and 100, got {percent:g}")
    check_checkpoint_id(candidate, "--canary")
    return Split(
        experiment_of(candidate),
        (Arm(PARENT_ARM, CURRENT, 100.0 - percent), Arm(CANARY_ARM, candidate, float(percent))),
    )
