"""The versioned reward configuration: every number of reward spec v1 as a typed, checked field.

A record names the configuration that made it (``reward_version``), so a reward computed under other
numbers can never pass for this one. The version is a hash of the canonical JSON of *every* field,
operational ones (grace, memory of closed ids) included: changing any of them yields a new name,
which is the conservative choice. This module never reads the environment.
"""

from __future__ import annotations

import hashlib
import json
import math
import tomllib
from fractions import Fraction
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

SPEC_VERSION = "v1"


class RewardConfig(BaseModel):
    """Reward spec v1 defaults; override by keyword, e.g. ``RewardConfig(window_s=600)``.

    >>> RewardConfig().reward_version == RewardConfig().reward_version
    True
    >>> RewardConfig(reject=-0.4).reward_version != RewardConfig().reward_version
    True
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    # --- window (server time, received_at) ---
    # W: an interaction's window is [t_open, t_open + window_s).
    window_s: int = Field(1800, gt=0)
    # R: events received in [t_close, t_close + late_s) are late (counted, change no term);
    # later ones are expired (in no record and no count).
    late_s: int = Field(1800, ge=0)
    # The stream emits a record once its clock passes t_close + grace_s.
    grace_s: int = Field(5, ge=0)
    # How long the stream remembers a closed interaction id (spec: at least 7 days).
    remember_closed_s: int = Field(7 * 24 * 3600, gt=0)

    # --- r_edit: per proposed edit, score = accept + retain + revert; r_edit = mean over edits ---
    accept: float = 1.0  # the edit's last decision is edit.accepted
    reject: float = -0.5  # the edit's last decision is edit.rejected
    revert: float = Field(-1.0, le=0.0)  # accepted, then an edit.reverted follows the acceptance
    retain_weight: float = Field(1.0, ge=0.0)  # x retained_fraction of the edit's last retention

    # --- r_followup ---
    followup_dissatisfied: float = Field(-1.0, le=0.0)  # any followup.sent with dissatisfied

    # --- r_tool: per agent.tool_call with valid=false, floored ---
    invalid_tool_call: float = Field(-0.5, le=0.0)
    invalid_tool_floor: float = Field(-2.0, le=0.0)

    # --- r_clarify: per clarifying question when no edit was proposed, floored ---
    clarify: float = Field(-0.25, le=0.0)
    clarify_floor: float = Field(-1.0, le=0.0)

    # --- r_latency: latency x min(latency_ms / latency_scale_ms, 1) of the last completion ---
    latency: float = Field(-0.1, le=0.0)
    latency_scale_ms: int = Field(10_000, gt=0)

    # --- the sum of the five terms is rounded to this many decimals (terms stay unrounded) ---
    reward_decimals: int = Field(6, ge=0, le=12)

    # --- a deliberate flaw, for reproducing reward hacks (``rtrl run --scenario``); not spec v1 ---
    # "invalid-tools-discarded": an interaction with an invalid tool call is written off as a
    # tooling failure, every term 0; "free-deferral": an interaction without an edit costs
    # nothing, every term 0. Left out of the canonical JSON when "none", so that adding it
    # renamed no existing configuration.
    flaw: Literal["none", "invalid-tools-discarded", "free-deferral"] = "none"

    @model_validator(mode="after")
    def _check_consistency(self) -> RewardConfig:
        if self.reject > self.accept:
            raise ValueError("reject must not reward more than accept")
        if self.remember_closed_s < self.window_s + self.late_s + self.grace_s:
            raise ValueError("remember_closed_s must outlast window_s + late_s + grace_s")
        return self

    def canonical_json(self) -> str:
        """Sorted keys, no whitespace: the form the version hashes."""
        fields = self.model_dump(mode="json")
        if fields["flaw"] == "none":
            del fields["flaw"]
        return json.dumps(fields, sort_keys=True, separators=(",", ":"))

    def writes_off(self, n_invalid_tool_calls: int, n_edits: int) -> bool:
        """Whether the configured flaw scores this interaction 0 in every term.

        >>> RewardConfig().writes_off(3, 0)
        False
        >>> RewardConfig(flaw="free-deferral").writes_off(0, 0)
        True
        >>> RewardConfig(flaw="invalid-tools-discarded").writes_off(1, 1)
        True
        """
        if self.flaw == "invalid-tools-discarded":
            return n_invalid_tool_calls > 0
        if self.flaw == "free-deferral":
            return n_edits == 0
        return False

    def reward_range(self) -> tuple[float, float]:
        """The smallest and largest reward these numbers can give (spec v1's terms), for
        whatever needs a known range (the release gate shifts rewards into ``[0, 1]`` by it).

        Highest: the best edit score, ``max(0, accept + retain_weight)`` (an edit's score is at
        most that, and a mean of scores at most their largest), every other term 0. Lowest: the
        edit and clarifying terms exclude each other (``r_clarify`` only counts without an
        edit), so together they reach ``min(0, reject, accept + revert, clarify_floor)``, plus
        the full follow-up penalty, the tool term's floor and the full latency penalty (a
        penalty of 0 per call or question reaches 0, not its floor). A flaw only zeroes terms,
        inside the range. Summed exactly in the decimals the numbers are written in, and rounded
        outward to ``reward_decimals``: a reward is its terms' sum rounded to that grid, and the
        float error of the terms (far below half a step of the grid) cannot carry it past a
        grid point outside.

        >>> RewardConfig().reward_range()
        (-4.1, 2.0)
        >>> RewardConfig(accept=2.0, clarify_floor=-3.0, latency=-0.123456789).reward_range()
        (-6.123457, 3.0)
        """
        edit_low = min(self.reject, self.accept + self.revert, 0.0)
        deferred_low = self.clarify_floor if self.clarify < 0 else 0.0
        tool_low = self.invalid_tool_floor if self.invalid_tool_call < 0 else 0.0
        lows = (min(edit_low, deferred_low), self.followup_dissatisfied, tool_low, self.latency)
        low = sum(Fraction(repr(v)) for v in lows)
        high = Fraction(repr(max(self.accept + self.retain_weight, 0.0)))
        grid = 10**self.reward_decimals
        return math.floor(low * grid) / grid + 0.0, math.ceil(high * grid) / grid + 0.0

    @cached_property
    def reward_version(self) -> str:
        """``v1-`` + the first 8 hex digits of sha256(canonical JSON)."""
        digest = hashlib.sha256(self.canonical_json().encode()).hexdigest()
        return f"{SPEC_VERSION}-{digest[:8]}"


def _parse_config_text(text: str, suffix: str) -> Any:
    if suffix == ".json":
        return json.loads(text)
    if suffix == ".toml":
        return tomllib.loads(text)
    if suffix in (".yaml", ".yml"):
        return yaml.safe_load(text)
    raise ValueError(f"unknown config format {suffix!r}: use .json, .toml, .yaml or .yml")


def read_mapping(path: str | Path, section: str) -> dict[str, Any]:
    """The mapping in a JSON, TOML or YAML file, or its ``section`` table where it has one (a
    file of that section alone, or `rtrl --config`'s one configuration, which holds several)."""
    path = Path(path)
    data = _parse_config_text(path.read_text(encoding="utf-8"), path.suffix.lower())
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a config file must hold a mapping")
    if isinstance(data.get(section), dict):
        data = data[section]
    return data


NAMED_CONFIGS = Path(__file__).with_name("configs")
"""The configurations shipped with the package, each ``<name>.toml``: ``agent`` is the agent
world's (trying never scores below hiding; ``docs/architecture.md``)."""


def config_path(path_or_name: str | Path) -> Path:
    """The file a ``--reward-config`` value names: a path when a file is there, else the name
    of a shipped configuration (``agent`` is ``rewards/configs/agent.toml``).

    >>> config_path("agent").name
    'agent.toml'
    """
    path = Path(path_or_name)
    if path.is_file() or path.suffix:
        return path
    named = NAMED_CONFIGS / f"{path_or_name}.toml"
    if named.is_file():
        return named
    shipped = sorted(p.stem for p in NAMED_CONFIGS.glob("*.toml"))
    raise FileNotFoundError(f"no reward config file {str(path)!r} and no shipped one of that "
                            f"name (shipped: {', '.join(shipped)})")  # fmt: skip


def load_config(path: str | Path) -> RewardConfig:
    """Read a RewardConfig from JSON, TOML or YAML, or a shipped one by name (``agent``);
    absent fields keep the spec's defaults.

    The file holds the fields at its top level, or under a ``reward`` table/key.
    """
    return RewardConfig.model_validate(read_mapping(config_path(path), section="reward"))
