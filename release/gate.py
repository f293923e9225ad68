"""The eval gate: whether a candidate checkpoint may be promoted to serve.

A candidate passes only if every rule holds: enough rollouts to judge it, a one-sided lower
confidence bound of its off-policy gain over the serving policy that exceeds the margin
``min_gain`` (a point estimate would promote about half of all candidates when the rewards carry
no signal; the bound promotes about ``1 - level`` of them), a candidate close
enough to the serving policy for that estimate to be trusted (KL and effective sample size), and
no reward-hacking alarm from the monitors (``rewards.monitors``). Each failing rule gives one
sentence, so that a rejected checkpoint says why; the figures behind them come with the decision.

Pure: no torch, so the decision can be made and tested wherever the numbers are.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # types only: importing them would load torch and polars
    from release.offpolicy import Estimate
    from rewards.monitors import Alarm


_READER = re.compile(r"harness|[A-Za-z_][\w.]*:[A-Za-z_]\w*")
"""``harness``, or ``module:factory`` (see ``release.candidate_evals.behaviour_reader``)."""


@dataclass(frozen=True)
class GateConfig:
    """The promotion rules' limits."""

    min_gain: float = 0.0  # the gain's lower bound must exceed this margin (negative: a loss)
    max_kl: float = 1.0  # KL(behaviour || candidate) per rollout, in nats
    min_ess_fraction: float = 0.2  # effective sample size / rollouts
    min_examples: int = 50  # rollouts needed to judge at all
    block_on_alarms: bool = True  # a monitor alarm rejects the candidate
    level: float = 0.95  # one-sided confidence level of the gain's lower bound
    resamples: int = 2000  # bootstrap resamples for the bound
    tis_cap: float = 2.0  # per-token importance ratios are truncated here in the estimate
    eval_prompts: int = 64  # recent held-out prompts the candidate generates for (0: no evals)
    eval_samples: int = 4  # generations per prompt and checkpoint
    eval_alpha: float = 0.05  # one-sided significance of a behaviour alarm
    # how a generation is read into the agent's actions: "harness" (agent, real text) or a
    # simulator's reader named "module:factory" (rtrl run's users: rtrl.token_reader)
    eval_reader: str = "harness"

    def __post_init__(self) -> None:
        if not _finite(self.min_gain):
            raise ValueError(f"GateConfig.min_gain must be a finite number, got {self.min_gain!r}")
        if not _finite(self.max_kl) or self.max_kl < 0:
            raise ValueError(f"GateConfig.max_kl must be a finite number >= 0, got {self.max_kl!r}")
        if not _finite(self.min_ess_fraction) or not 0 <= self.min_ess_fraction <= 1:
            raise ValueError(
                f"GateConfig.min_ess_fraction must be in [0, 1], got {self.min_ess_fraction!r}"
            )
        if (
            not isinstance(self.min_examples, int)
            or isinstance(self.min_examples, bool)
            or self.min_examples < 1
        ):
            raise ValueError(
                f"GateConfig.min_examples must be an integer >= 1, got {self.min_examples!r}"
            )
        if not _finite(self.level) or not 0.5 <= self.level < 1:
            raise ValueError(f"GateConfig.level must be in [0.5, 1), got {self.level!r}")
        if (
            not isinstance(self.resamples, int)
            or isinstance(self.resamples, bool)
            or self.resamples < 100
        ):
            raise ValueError(
                f"GateConfig.resamples must be an integer >= 100, got {self.resamples!r}"
            )
        if not _finite(self.tis_cap) or self.tis_cap < 1:
            raise ValueError(f"GateConfig.tis_cap must be >= 1, got {self.tis_cap!r}")
        for name in ("eval_prompts", "eval_samples"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"GateConfig.{name} must be an integer >= 0, got {value!r}")
        if not _finite(self.eval_alpha) or not 0 < self.eval_alpha < 0.5:
            raise ValueError(f"GateConfig.eval_alpha must be in (0, 0.5), got {self.eval_alpha!r}")
        if not isinstance(self.eval_reader, str) or not _READER.fullmatch(self.eval_reader):
            raise ValueError(
                "GateConfig.eval_reader must be 'harness' or 'module:factory', "
                f"got {self.eval_reader!r}"
            )
        if not isinstance(self.block_on_alarms, bool):
            raise ValueError(
                f"GateConfig.block_on_alarms must be a bool, got {self.block_on_alarms!r}"
            )


@dataclass(frozen=True)
class GateDecision:
    passed: bool
    reasons: tuple[str, ...]  # one sentence per failing rule; empty iff passed
    figures: dict[str, float | str]  # the numbers the rules looked at, and the method


def decide(
    estimate: Estimate, alarms: Sequence[Alarm], config: GateConfig, eval_alarms: Sequence[str] = ()
) -> GateDecision:
    """Apply every rule to the candidate's estimate, its monitors' alarms and the alarms of its
    own evals (``release.candidate_evals``, one sentence each).

    >>> from types import SimpleNamespace as Est  # stands in for release.offpolicy.Estimate
    >>> good = Est(value=0.52, behaviour_mean=0.50, ess=80.0, kl=0.1, n=100, lower=0.004,
    ...            level=0.95, method="m", resamples=1000)
    >>> decide(good, [], GateConfig()).passed
    True
    >>> bad = Est(value=0.469, behaviour_mean=0.50, ess=12.0, kl=0.1, n=100, lower=-0.09,
    ...           level=0.95, method="m", resamples=1000)
    >>> decide(bad, [], GateConfig()).reasons
    ('gain -0.031, its 95% lower bound -0.090 not above 0.000', 'ESS 12 of 100 below 20%')
    """
    n = int(estimate.n)
    gain = estimate.value - estimate.behaviour_mean
    ess_fraction = estimate.ess / n if n > 0 else 0.0
    figures: dict[str, float | str] = {
        "n": float(n),
        "value": float(estimate.value),
        "behaviour_mean": float(estimate.behaviour_mean),
        "gain": float(gain),
        "lower": float(estimate.lower),
        "level": float(estimate.level),
        "method": str(estimate.method),
        "resamples": float(estimate.resamples),
        "kl": float(estimate.kl),
        "ess": float(estimate.ess),
        "ess_fraction": float(ess_fraction),
        "alarms": float(len(alarms)),
        "eval_alarms": float(len(eval_alarms)),
    }
    reasons: list[str] = []
    not_finite = [name for name in ("value", "behaviour_mean", "kl", "ess", "lower")
                  if not _finite(figures[name])]  # fmt: skip
    if not_finite:
        # NaN fails no comparison below: say so rather than let it pass
        reasons.append(
            "estimate not finite: " + ", ".join(f"{name}={figures[name]}" for name in not_finite)
        )
    if n < config.min_examples:
        reasons.append(f"{n} examples, fewer than the {config.min_examples} needed")
    if not estimate.lower > config.min_gain:
        reasons.append(
            f"gain {gain:.3f}, its {estimate.level:.0%} lower bound "
            f"{estimate.lower:.3f} not above {config.min_gain:.3f}"
        )
    if estimate.kl > config.max_kl:
        reasons.append(f"KL {estimate.kl:.3f} above {config.max_kl:.3f}")
    if ess_fraction < config.min_ess_fraction:
        reasons.append(f"ESS {estimate.ess:.0f} of {n} below {config.min_ess_fraction:.0%}")
    if config.block_on_alarms:
        reasons.extend(f"monitor alarm: {alarm.message}" for alarm in alarms)
        reasons.extend(eval_alarms)
    return GateDecision(passed=not reasons, reasons=tuple(reasons), figures=figures)


def _finite(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
