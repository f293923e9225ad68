"""A canary's look at its live A/B: read the arms from the warehouse, judge, record.

A look is taken when new data has landed: the arms' counts of users and of (scored)
interactions differ from those the last recorded look saw. Polling with nothing new records
nothing, so ``rtrl canary decide --watch`` can poll often; the one exception is a canary past
its deadline, which is judged (and so ended) on whatever there is.

The figures come through the warehouse's published interface, its DuckDB catalog: every
reward record of the experiment ``canary-<id>`` in the ``rewards`` mart (latest revision of each
interaction), summed per user. Privacy-mode interactions carry no user id; they cannot be put
in a unit of randomisation and are left out.

Each look is recorded on the canary's checkpoint (``evals["canary"]``: looks, every verdict),
and a verdict other than ``wait`` moves it, once, to promoted (rolled out) or rejected (rolled
back, with the reasons). The registry refuses any second move (``CheckpointRegistry.restage``),
so a decider killed and restarted, or two deciders, never promote a canary twice; announcing is
``checkpoints.publish.announce_missing``, which catches up whatever a crash left unannounced.

A rollback needs no new checkpoint here: during a canary its parent is still the promoted,
followed checkpoint, and rejecting the canary ends its arm on every gateway at once.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb

from checkpoints.canary_names import CANARY_ARM, PARENT_ARM
from checkpoints.record import CANARY, PROMOTED, REJECTED, CheckpointInfo
from checkpoints.store import CheckpointRegistry
from release.canary import (
    Arm,
    CanaryConfig,
    CanaryVerdict,
    UserSums,
    arm_of,
    judge,
    seen_of,
)
from rewards.monitors import MonitorThresholds

log = logging.getLogger("rtrl.canary")

# the monitored rates the canary watches live, as the rewards mart counts them
_FLAGS = {
    "invalid_tool_call_rate": "n_invalid_tool_calls >= 1",
    "edit_rate": "n_edits >= 1",
    "clarifying_rate": "n_clarifying >= 1",
}  # the censored share is the interactions not scored (release.canary.arm_of)


def live_arms(catalog: Path, experiment: str) -> tuple[dict[str, Arm], int]:
    """Each arm of ``experiment`` as per-user sums from the catalog's ``rewards`` mart, and how
    many users were seen in more than one arm (counted in each; the canary's judge stops a
    split that does not keep people apart)."""
    flags = ", ".join(f"count(*) FILTER (WHERE {sql}) AS {name}" for name, sql in _FLAGS.items())
    query = f"""
        SELECT experiment_arm, user_id, count(*) AS interactions,
               count(*) FILTER (WHERE status = 'scored') AS scored,
               coalesce(sum(reward), 0) AS reward, {flags}
        FROM rewards
        WHERE experiment_name = ? AND user_id IS NOT NULL
        GROUP BY experiment_arm, user_id"""
    with duckdb.connect(str(catalog), read_only=True) as con:
        rows = con.execute(query, [experiment]).fetchall()
    users: dict[str, list[UserSums]] = {PARENT_ARM: [], CANARY_ARM: []}
    arms_of: dict[str, set[str]] = {}
    for arm, user, interactions, scored, reward, *flagged in rows:
        users.setdefault(arm, []).append(
            UserSums(interactions, scored, float(reward), dict(zip(_FLAGS, flagged, strict=True)))
        )
        arms_of.setdefault(user, set()).add(arm)
    crossed = sum(len(arms) > 1 for arms in arms_of.values())
    return {arm: arm_of(found) for arm, found in users.items()}, crossed


def live_canaries(registry: CheckpointRegistry) -> list[CheckpointInfo]:
    return [info for info in registry.list() if info.status == CANARY]


def expired(info: CheckpointInfo, config: CanaryConfig, now: datetime) -> bool:
    """Whether the canary's deadline, counted from its registration, has passed."""
    started = datetime.fromisoformat(info.created_at.replace("Z", "+00:00"))
    return now >= started + timedelta(hours=config.deadline_hours)


def look(registry: CheckpointRegistry, catalog: Path, candidate: str,
         thresholds: MonitorThresholds | None = None,
         now: datetime | None = None) -> CanaryVerdict:  # fmt: skip
    """One look at ``candidate``'s canary: judge it and record the verdict (and the outcome).
    With nothing new since the last recorded look (and the deadline not passed), nothing is
    recorded: the verdict returned has ``new_data`` False."""
    info = registry.get(candidate)
    if info.status != CANARY:
        raise ValueError(f"{candidate} is {info.status}, not a live canary")
    stage = dict(info.evals["canary"])
    config = CanaryConfig.model_validate(stage["config"])
    arms, crossed = live_arms(catalog, stage["experiment"])
    if crossed:
        log.warning("%s: %d user(s) seen in both arms", stage["experiment"], crossed)
    unknown = sorted(set(arms) - {PARENT_ARM, CANARY_ARM})
    if unknown:
        log.warning(
            "%s: arms %s are not the canary's and are ignored", stage["experiment"], unknown
        )
    parent, canary = arms[PARENT_ARM], arms[CANARY_ARM]
    past = expired(info, config, now or datetime.now(UTC))
    last = stage["verdicts"][-1] if stage["verdicts"] else None
    if not past and last is not None and last.get("seen") == seen_of(parent, canary):
        verdict = judge(parent, canary, config, thresholds or MonitorThresholds(),
                        int(stage["looks"]), expired=False, crossed=crossed)  # fmt: skip
        why = f"no new data since look {stage['looks']}: no look taken"
        return replace(verdict, reasons=(why, *verdict.reasons), new_data=False)
    verdict = judge(parent, canary, config, thresholds or MonitorThresholds(),
                    int(stage["looks"]) + 1, expired=past, crossed=crossed)  # fmt: skip
    stage["looks"] = verdict.look
    stage["verdicts"] = [*stage["verdicts"], verdict.to_json()]
    if verdict.verdict == "wait":
        registry.restage(candidate, CANARY, evals={"canary": stage})
    elif verdict.verdict == "rollout":
        stage["outcome"] = "rolled_out"
        registry.restage(candidate, PROMOTED, evals={"canary": stage})
    else:
        stage["outcome"] = "rolled_back"
        reasons = tuple(f"canary rolled back: {reason}" for reason in verdict.reasons)
        registry.restage(candidate, REJECTED, reasons, evals={"canary": stage})
    log.info("canary %s, look %d: %s%s", candidate, verdict.look, verdict.verdict.upper(),
             "".join(f"; {r}" for r in verdict.reasons))  # fmt: skip
    return verdict
