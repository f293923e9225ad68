"""The quality gate every training batch passes: a Great Expectations suite, run in memory.

The suite checks a *candidate*: every non-private row of the rewards mart that would go into
the batch, censored ones included (so the censored share can be measured), with its age. It asks:

* schema: exactly the rewards mart's columns, plus ``age_s``;
* nulls: ids, version, status and times always; ``reward`` and ``user_id`` on scored rows;
* reward bounds: within what reward spec v1 can produce under the default configuration;
* unique interaction ids;
* freshness: the newest interaction closed at most ``max_age_s`` ago;
* censored share: at most ``max_censored_share`` of the rows are censored;
* privacy: no privacy-mode row at all (they are filtered before; the gate makes sure).

A failing candidate is quarantined with the report :func:`validate` returns; it never becomes a
batch a trainer can see.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from rewards.config import RewardConfig
from rewards.record import FIELD_NAMES

log = logging.getLogger(__name__)


def reward_bounds(config: RewardConfig) -> tuple[float, float]:
    """The smallest and largest reward spec v1 can give under ``config``.

    An edit scores between min(reject, accept + revert) and accept + retain_weight; the other
    terms lie between their floor (or their full penalty) and 0.

    >>> reward_bounds(RewardConfig())
    (-4.6, 2.0)
    """
    edit_low = min(config.reject, config.accept + config.revert, 0.0)
    edit_high = max(config.accept + config.retain_weight, 0.0)
    low = (edit_low + config.followup_dissatisfied + config.invalid_tool_floor
           + config.clarify_floor + config.latency)  # fmt: skip
    return round(low, 9), round(edit_high, 9)


@dataclass(frozen=True)
class QualityConfig:
    """The thresholds of the gate; typed, checked, never read from the environment."""

    reward_min: float = field(default_factory=lambda: reward_bounds(RewardConfig())[0])
    reward_max: float = field(default_factory=lambda: reward_bounds(RewardConfig())[1])
    max_age_s: int = 2 * 24 * 3600  # the newest interaction of a batch closed at most this long ago
    max_censored_share: float = 0.5

    def __post_init__(self) -> None:
        if self.reward_min > self.reward_max:
            raise ValueError("reward_min must not exceed reward_max")
        if not 0.0 <= self.max_censored_share <= 1.0:
            raise ValueError("max_censored_share is a share, in [0, 1]")


CANDIDATE_COLUMNS = (*FIELD_NAMES, "age_s")


def _suite(config: QualityConfig):  # noqa: ANN202 - great_expectations types are heavy to import
    import great_expectations as gx

    e = gx.expectations
    scored = 'status=="scored"'
    expectations = [
        e.ExpectTableColumnsToMatchSet(column_set=list(CANDIDATE_COLUMNS), exact_match=True),
        *(e.ExpectColumnValuesToNotBeNull(column=c) for c in (
            "interaction_id", "revision", "reward_version", "status", "checkpoint_id",
            "t_open", "t_close")),
        *(e.ExpectColumnValuesToNotBeNull(column=c, row_condition=scored, condition_parser="pandas")
          for c in ("reward", "user_id")),
        e.ExpectColumnValuesToBeBetween(column="reward", min_value=config.reward_min,
                                        max_value=config.reward_max),
        # an interaction is (org_id, interaction_id): two organisations may share an id
        e.ExpectCompoundColumnsToBeUnique(column_list=["org_id", "interaction_id"]),
        e.ExpectColumnMinToBeBetween(column="age_s", max_value=config.max_age_s),
        e.ExpectColumnValuesToBeInSet(column="status", value_set=["scored"],
                                      mostly=1.0 - config.max_censored_share),
        e.ExpectColumnValuesToNotBeInSet(column="censor_reason", value_set=["privacy_mode"]),
    ]  # fmt: skip
    suite = gx.ExpectationSuite(name="training_batch")
    for expectation in expectations:
        suite.add_expectation(expectation)
    return suite


def validate(candidate: pl.DataFrame, config: QualityConfig) -> tuple[bool, dict[str, Any]]:
    """Run the suite on a candidate; (passed, the JSON-ready validation report)."""
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    logging.getLogger("great_expectations").setLevel(logging.WARNING)
    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    suite = context.suites.add(_suite(config))
    asset = context.data_sources.add_pandas("warehouse").add_dataframe_asset("candidate")
    definition = asset.add_batch_definition_whole_dataframe("whole")
    frame = candidate.with_columns(pl.col("event_ids").list.join(" ")).to_pandas()
    result = definition.get_batch(batch_parameters={"dataframe": frame}).validate(suite)
    report = result.to_json_dict()
    failed = [r["expectation_config"]["type"] for r in report["results"] if not r["success"]]
    if failed:
        log.info("quality gate failed: %s", ", ".join(failed))
    return bool(result.success), report
