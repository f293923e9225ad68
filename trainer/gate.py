"""The eval gate: whether a candidate checkpoint may be promoted to serve.

A candidate passes only if every rule holds: enough rollouts to judge it, an off-policy estimate
that does not fall short of the serving policy's reward by more than allowed, a candidate close
enough to the serving policy for that estimate to be trusted (KL and effective sample size), and
no reward-hacking alarm from the monitors (``rewards.monitors``). Each failing rule gives one
sentence, so that a rejected checkpoint says why; the figures behind them come with the decision.

Pure: no torch, so the decision can be made and tested wherever the numbers are.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # types only: importing them would load torch and polars
    from rewards.monitors import Alarm
    from trainer.offpolicy import Estimate


@dataclass(frozen=True)
class GateConfig:
    """The promotion rules' limits."""

    min_gain: float = 0.0  # estimate - behaviour mean must be >= this (negative: allowed loss)
    max_kl: float = 1.0  # KL(behaviour || candidate) per rollout, in nats
    min_ess_fraction: float = 0.2  # effective sample size / rollouts
    min_examples: int = 50  # rollouts needed to judge at all
    block_on_alarms: bool = True  # a monitor alarm rejects the candidate

    def __post_init__(self) -> None:
        if not _finite(self.min_gain):
            raise ValueError(f"GateConfig.min_gain must be a finite number, got {self.min_gain!r}")
        if not _finite(self.max_kl) or self.max_kl < 0:
            raise ValueError(f"GateConfig.max_kl must be a finite number >= 0, got {self.max_kl!r}")
        if not _finite(self.min_ess_fraction) or not 0 <= self.min_ess_fraction <= 1:
            raise ValueError("GateConfig.min_ess_fraction must be in [0, 1], "
                             f"got {self.min_ess_fraction!r}")
        if (not isinstance(self.min_examples, int) or isinstance(self.min_examples, bool)
                or self.min_examples < 1):
            raise ValueError(f"GateConfig.min_examples must be an integer >= 1, "
                             f"got {self.min_examples!r}")
        if not isinstance(self.block_on_alarms, bool):
            raise ValueError(f"GateConfig.block_on_alarms must be a bool, "
                             f"got {self.block_on_alarms!r}")


@dataclass(frozen=True)
class GateDecision:
    passed: bool
    reasons: tuple[str, ...]  # one sentence per failing rule; empty iff passed
    figures: dict[str, float]  # the numbers the rules looked at


def decide(estimate: Estimate, alarms: Sequence[Alarm], config: GateConfig) -> GateDecision:
    """Apply every rule to the candidate's estimate and its monitors' alarms.

    >>> from types import SimpleNamespace as Est  # stands in for trainer.offpolicy.Estimate
    >>> good = Est(value=0.52, behaviour_mean=0.50, ess=80.0, kl=0.1, n=100)
    >>> decide(good, [], GateConfig()).passed
    True
    >>> bad = Est(value=0.469, behaviour_mean=0.50, ess=12.0, kl=0.1, n=100)
    >>> decide(bad, [], GateConfig()).reasons
    ('estimated reward gain -0.031 < 0.000', 'ESS 12 of 100 below 20%')
    """
    n = int(estimate.n)
    gain = estimate.value - estimate.behaviour_mean
    ess_fraction = estimate.ess / n if n > 0 else 0.0
    figures = {
        "n": float(n),
        "value": float(estimate.value),
        "behaviour_mean": float(estimate.behaviour_mean),
        "gain": float(gain),
        "kl": float(estimate.kl),
        "ess": float(estimate.ess),
        "ess_fraction": float(ess_fraction),
        "alarms": float(len(alarms)),
    }
    reasons: list[str] = []
    not_finite = [name for name in ("value", "behaviour_mean", "kl", "ess")
                  if not _finite(figures[name])]  # fmt: skip
    if not_finite:
        # NaN fails no comparison below: say so rather than let it pass
        reasons.append("estimate not finite: " + ", ".join(
            f"{name}={figures[name]}" for name in not_finite))
    if n < config.min_examples:
        reasons.append(f"{n} examples, fewer than the {config.min_examples} needed")
    if gain < config.min_gain:
        reasons.append(f"estimated reward gain {gain:.3f} < {config.min_gain:.3f}")
    if estimate.kl > config.max_kl:
        reasons.append(f"KL {estimate.kl:.3f} above {config.max_kl:.3f}")
    if ess_fraction < config.min_ess_fraction:
        reasons.append(f"ESS {estimate.ess:.0f} of {n} below {config.min_ess_fraction:.0%}")
    if config.block_on_alarms:
        reasons.extend(f"monitor alarm: {alarm.message}" for alarm in alarms)
    return GateDecision(passed=not reasons, reasons=tuple(reasons), figures=figures)


def _finite(value: object) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value))
