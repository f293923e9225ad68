"""What the monitors' calibration tests share: the stated level, the Monte Carlo margin a
measured false-alarm rate may exceed it by, and thresholds at 0 (only the test stands between
noise and an alarm)."""

from __future__ import annotations

import math

from rewards.monitors import MetricThreshold, MonitorThresholds

ALPHA = 0.05


def margin(rate: float, trials: int) -> float:
    """Three Monte Carlo standard errors of a rate ``rate`` over ``trials``."""
    return 3 * math.sqrt(rate * (1 - rate) / trials)


# every rate's thresholds at 0: only the test stands between noise and an alarm
NO_THRESHOLDS = MonitorThresholds(**{
    m: MetricThreshold(relative=0, absolute=0, direction=d) for m, d in (
        ("edit_rate", "down"), ("clarifying_rate", "up"), ("invalid_tool_call_rate", "up"),
        ("tool_call_rate", "down"), ("tool_calls_per_interaction", "up"),
        ("subagent_rate", "both"), ("unused_subagent_share", "up"), ("censored_share", "up"))
})  # fmt: skip
