"""How a canary is run and judged (``CanaryConfig``: its share of users, its error rates, its
waits), and what its checkpoint records of it when registered (``canary_stage``). The rules
these settings feed: ``release.canary``."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from checkpoints.canary_names import experiment_of
from rewards.config import RewardConfig
from rewards.monitors import BAD_DIRECTION

# keys of a canary registered before the rules above; such a canary is judged by them
_LEGACY_KEYS = ("min_interactions", "looks", "max_loss")


class CanaryConfig(BaseModel):
    """How a canary is run and judged."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    percent: float = Field(10.0, gt=0, lt=100)  # share of users on the candidate
    min_users: int = Field(100, ge=2)  # users with a scored interaction, each arm, before a verdict
    margin: float = Field(0.1, ge=0)  # a live reward loss up to this is no harm
    alpha: float = Field(0.05, gt=0, lt=0.5)  # rollout of a canary worse by the margin, any look
    guardrail_alpha: float = Field(0.05, gt=0, lt=0.5)  # any guardrail alarm on no change
    guardrails: tuple[str, ...] = (
        "censored_share",
        "clarifying_rate",
        "edit_rate",
        "invalid_tool_call_rate",
    )
    tuning_users: int = Field(2000, ge=2)  # N*: users where the bounds are tightest
    srm_alpha: float = Field(0.001, gt=0, lt=0.5)
    # no rollout before this much exposure (one weekly cycle: users who come on other days,
    # or less often, have been seen), counted from the canary's start
    min_exposure_hours: float = Field(168.0, ge=0)
    deadline_hours: float = Field(336.0, gt=0)  # undecided by then: rolled back
    # each user's outcome is taken over this window after their first exposure, and counts
    # once it has closed (0: every interaction landed so far, no window)
    user_window_hours: float = Field(24.0, ge=0)
    # users seen in both arms, as a share of all users, past which the split is broken
    max_crossed_share: float = Field(0.01, ge=0, lt=1)
    # the reward's minimum: the canary's excess censored share counts at it (reward v1's
    # default configuration's, -4.1; release.canary_estimand)
    reward_min: float = Field(default_factory=lambda: RewardConfig().reward_range()[0])
    # users' strata by activity before the canary, with their weights (shares of the
    # interactions), fixed before it starts; None: one stratum
    strata: dict[str, float] | None = None
    min_stratum_users: int = Field(20, ge=2)  # scored users, each stratum and arm, for a verdict

    @model_validator(mode="before")
    @classmethod
    def _drop_legacy(cls, data: Any) -> Any:
        if isinstance(data, dict):
            return {k: v for k, v in data.items() if k not in _LEGACY_KEYS}
        return data

    @model_validator(mode="after")
    def _deadline_after_exposure(self) -> CanaryConfig:
        if self.deadline_hours <= self.min_exposure_hours:
            raise ValueError(f"deadline_hours ({self.deadline_hours:g}) must be above "
                             f"min_exposure_hours ({self.min_exposure_hours:g})")  # fmt: skip
        return self

    @field_validator("strata")
    @classmethod
    def _weights(cls, value: dict[str, float] | None) -> dict[str, float] | None:
        if value is not None and (not value or any(not w > 0 for w in value.values())):
            raise ValueError("strata: at least one, each with a weight above 0")
        return value

    @field_validator("guardrails")
    @classmethod
    def _known(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        unknown = sorted(set(value) - set(BAD_DIRECTION))
        if unknown:
            raise ValueError(f"guardrails {unknown} have no bad direction; known: "
                             f"{sorted(BAD_DIRECTION)}")  # fmt: skip
        return value


def canary_stage(candidate: str, config: CanaryConfig) -> dict:
    """What a canary's checkpoint records of its stage (``evals["canary"]``) when registered:
    its experiment, its share and rules; ``outcome`` is set once, by its verdict."""
    return {
        "experiment": experiment_of(candidate),
        "percent": config.percent,
        "config": config.model_dump(),
        "looks": 0,
        "outcome": None,
        "verdicts": [],
    }
