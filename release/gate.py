"""The eval gate: whether a candidate checkpoint may be promoted to serve.

A candidate passes only if every rule holds: enough rollouts to judge it, a one-sided lower
confidence bound of its off-policy gain over the serving policy that exceeds the margin
``min_gain`` (a point estimate would promote about half of all candidates when the rewards carry
no signal; the bound promotes about ``1 - level`` of them), a candidate close
enough to the serving policy for that estimate to be trusted (KL and effective sample size), and
no reward-hacking alarm from the monitors (``rewards.monitors``). Each failing rule gives one
sentence, so that a rejected checkpoint says why; the figures behind them come with the decision.

The estimate and its bound are ``release.offpolicy_bound``'s: clipped importance weights on
rewards shifted into their known range (the reward configuration's, :meth:`GateConfig.for_reward`),
a small-sample lower bound over users. Held-out evidence is spent once per parent by splitting
alpha across attempts (:func:`attempt_level`): a retry on the same parent
(a rejected candidate's batch trained on again with the next one, the same users held out) is
judged at a stricter level, so that over all of a parent's attempts the chance of promoting a
candidate that is no better stays below ``1 - level``.

Pure: no torch, so the decision can be made and tested wherever the numbers are.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agent.tasks import GROUPS, Group
from release.offpolicy_bound import WEIGHT_CAP
from rewards.config import RewardConfig

if TYPE_CHECKING:  # types only: importing them would load polars
    from release.offpolicy_bound import Estimate
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
    min_users: int = 10  # users (the bound's independent units) needed to judge at all
    block_on_alarms: bool = True  # a monitor alarm rejects the candidate
    level: float = 0.95  # one-sided confidence level over all attempts on one parent
    resamples: int = 2000  # bootstrap resamples (of users) for the bound
    weight_cap: float = WEIGHT_CAP  # a completion's importance weight is clipped here
    # the reward's known range (default: reward v1's default configuration's, -4.1..2; see
    # GateConfig.for_reward): the clip may only lower the estimate when rewards are shifted >= 0
    reward_min: float = field(default_factory=lambda: RewardConfig().reward_range()[0])
    reward_max: float = field(default_factory=lambda: RewardConfig().reward_range()[1])
    eval_prompts: int = 64  # recent held-out prompts the candidate generates for (0: no evals)
    eval_samples: int = 4  # generations per prompt and checkpoint
    eval_alpha: float = 0.05  # one-sided significance of a behaviour alarm
    # how a generation is read into the agent's actions: "harness" (agent, real text) or a
    # simulator's reader named "module:factory" (rtrl run's users: rtrl.worlds.token_reader)
    eval_reader: str = "harness"
    # the task group whose pass rate under the hidden tests must not fall (harness reader only):
    # shipped, easy or held_out (agent/tasks.toml)
    eval_tasks: Group = "shipped"
    # before the candidate serves, its probability of opening an agent task's first answer with
    # a tool call, against its parent's (release.tool_opening); a fall past its limits blocks it
    tool_opening: bool = False

    def __post_init__(self) -> None:
        if not _finite(self.min_gain):
            raise ValueError(f"GateConfig.min_gain must be a finite number, got {self.min_gain!r}")
        if not _finite(self.max_kl) or self.max_kl < 0:
            raise ValueError(f"GateConfig.max_kl must be a finite number >= 0, got {self.max_kl!r}")
        if not _finite(self.min_ess_fraction) or not 0 <= self.min_ess_fraction <= 1:
            raise ValueError(
                f"GateConfig.min_ess_fraction must be in [0, 1], got {self.min_ess_fraction!r}"
            )
        for name in ("min_examples", "min_users"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"GateConfig.{name} must be an integer >= 1, got {value!r}")
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
        if not _finite(self.weight_cap) or self.weight_cap < 1:
            raise ValueError(f"GateConfig.weight_cap must be >= 1, got {self.weight_cap!r}")
        if not (_finite(self.reward_min) and _finite(self.reward_max)
                and self.reward_min < self.reward_max):  # fmt: skip
            raise ValueError(
                "GateConfig.reward_min must be below GateConfig.reward_max, both finite, got "
                f"{self.reward_min!r}, {self.reward_max!r}"
            )
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
        if self.eval_tasks not in GROUPS:
            raise ValueError(
                f"GateConfig.eval_tasks must be one of {', '.join(GROUPS)}, got {self.eval_tasks!r}"
            )
        if not isinstance(self.block_on_alarms, bool):
            raise ValueError(
                f"GateConfig.block_on_alarms must be a bool, got {self.block_on_alarms!r}"
            )

    @classmethod
    def for_reward(cls, reward: RewardConfig, **limits: object) -> GateConfig:
        """The gate's settings for rewards computed under ``reward``: its range, and ``limits``.

        >>> c = GateConfig.for_reward(RewardConfig(accept=2.0), min_gain=0.1)
        >>> c.reward_min, c.reward_max, c.min_gain
        (-4.1, 3.0, 0.1)
        """
        low, high = reward.reward_range()
        return cls(reward_min=low, reward_max=high, **limits)  # type: ignore[arg-type]


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

    >>> from release.offpolicy_bound import Estimate as Est
    >>> good = Est(value=0.52, behaviour_mean=0.50, ess=80.0, kl=0.1, n=100, users=30,
    ...            lower=0.004, level=0.95, method="m", resamples=1000)
    >>> decide(good, [], GateConfig()).passed
    True
    >>> bad = Est(value=0.469, behaviour_mean=0.50, ess=12.0, kl=0.1, n=100, users=30,
    ...           lower=-0.09, level=0.95, method="m", resamples=1000)
    >>> decide(bad, [], GateConfig()).reasons
    ('gain -0.031, its 95% lower bound -0.090 not above 0.000', 'ESS 12 of 100 below 20%')
    """
    n = int(estimate.n)
    gain = estimate.value - estimate.behaviour_mean
    ess_fraction = estimate.ess / n if n > 0 else 0.0
    figures: dict[str, float | str] = {
        "n": float(n),
        "censored": float(estimate.censored),
        "users": float(estimate.users),
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
        "clipped": float(estimate.clipped),
        "df": float(estimate.df),
        "reward_min": float(estimate.reward_min),
        "reward_max": float(estimate.reward_max),
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
    if estimate.users < config.min_users:
        reasons.append(f"{estimate.users} users, fewer than the {config.min_users} needed")
    if not estimate.lower > config.min_gain:
        reasons.append(
            f"gain {gain:.3f}, its {100 * estimate.level:.4g}% lower bound "
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


def attempt_level(level: float, attempt: int) -> float:
    """The confidence level of a parent's ``attempt``-th decision (1-based) when ``level`` is
    the level over all of them: alpha spent as ``alpha * 6 / (pi^2 k^2)``, which sums to at most
    alpha over any number of attempts (the union bound needs nothing about how the attempts'
    data overlap). The first attempt gets 61 % of alpha, the second 15 %, the eighth 1 %.

    >>> round(attempt_level(0.95, 1), 4), round(attempt_level(0.95, 2), 4)
    (0.9696, 0.9924)
    """
    if not isinstance(attempt, int) or attempt < 1:
        raise ValueError(f"attempt must be an integer >= 1, got {attempt!r}")
    return 1 - (1 - level) * 6 / (math.pi**2 * attempt**2)


def _finite(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
