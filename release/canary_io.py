"""A canary's look at its live A/B: read the arms from the warehouse, judge, record.

A look is taken when new data has landed: the arms' counts of users and of (scored)
interactions differ from those the last recorded look saw. Polling with nothing new records
nothing, so ``rtrl canary decide --watch`` can poll often; the one exception is a canary past
its deadline, which is judged (and so ended) on whatever there is.

The figures come through the warehouse's published interface, its DuckDB catalog: every
reward record of the experiment ``canary-<id>`` in the ``rewards`` mart (latest revision of each
interaction) becomes a row of the canary's evidence, landed at the first look that sees it, and
the look judges what that evidence shows at its time (``release.canary_replay.look_at``: each
user's fixed window after first exposure, the minimum exposure, strata by activity in the 28
days before the canary). Privacy-mode interactions carry no user id; they cannot be put in a
unit of randomisation and are left out. The evidence is rewritten whole at each recorded look,
so ``rtrl canary evaluate --checkpoint`` re-runs the course to the same decision.

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
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb

from checkpoints.canary_names import CANARY_ARM, PARENT_ARM
from checkpoints.record import CANARY, PROMOTED, REJECTED, CheckpointInfo
from checkpoints.store import CheckpointRegistry
from release.canary import CanaryVerdict
from release.canary_config import CanaryConfig
from release.canary_estimand import ALL
from release.canary_evidence import FILE as EVIDENCE_FILE
from release.canary_evidence import Header, Row, Share, read_evidence, write_evidence
from release.canary_replay import look_at
from rewards.monitors import MonitorThresholds

log = logging.getLogger("rtrl.canary")

# users' strata by their interactions in the 28 days before the canary, for canaries configured
# with strata: a live canary's strata must be named so
ACTIVITY_DAYS = 28
LIVE_STRATA = {"new": (0, 0), "light": (1, 9), "heavy": (10, None)}


def stratum_of(count: int) -> str:
    """A user's stratum by their interactions before the canary.

    >>> stratum_of(0), stratum_of(3), stratum_of(40)
    ('new', 'light', 'heavy')
    """
    for name, (low, high) in LIVE_STRATA.items():
        if count >= low and (high is None or count <= high):
            return name
    raise ValueError(f"no stratum for {count}")


def live_rows(catalog: Path, experiment: str, config: CanaryConfig, started_at: datetime,
              known: Sequence[Row], now: datetime) -> list[Row]:  # fmt: skip
    """The canary's evidence rows: those of the file so far (``known``), and every reward
    revision of the experiment in the catalog's ``rewards`` mart not among them, landed at
    ``now`` (the look that first sees it). Privacy-mode interactions carry no user id and are
    left out, as are arms other than the canary's two.

    Rows name their organisation (a user is (org_id, user_id)). A file whose rows were written
    without it goes on without it until its canary ends, so that no interaction is counted
    once under each form."""
    if config.strata is not None and set(config.strata) - set(LIVE_STRATA):
        raise ValueError(
            f"a live canary's strata are {sorted(LIVE_STRATA)} (activity in the "
            f"{ACTIVITY_DAYS} days before it), got {sorted(config.strata)}"
        )
    query = """
        SELECT interaction_id, revision, user_id, experiment_arm, t_open, reward,
               n_invalid_tool_calls, n_clarifying, n_edits, n_tool_calls, org_id
        FROM rewards
        WHERE experiment_name = ? AND user_id IS NOT NULL AND experiment_arm IN (?, ?)"""
    prior = """
        SELECT org_id, user_id, count(*) FROM rewards
        WHERE user_id IS NOT NULL AND t_open >= ? AND t_open < ?
        GROUP BY ALL"""
    with duckdb.connect(str(catalog), read_only=True) as con:
        found = con.execute(query, [experiment, PARENT_ARM, CANARY_ARM]).fetchall()
        since = started_at - timedelta(days=ACTIVITY_DAYS)
        counts = con.execute(prior, [since, started_at]).fetchall() if config.strata else []
    with_org = not known or any(r.org_id is not None for r in known)
    activity: dict[tuple[str | None, str], int] = {}
    for org, user, n in counts:
        unit = (org if with_org else None, user)
        activity[unit] = activity.get(unit, 0) + int(n)
    have = {(r.org_id, r.interaction_id, r.revision) for r in known}
    rows = list(known)
    for iid, revision, user, arm, t_open, reward, invalid, clarifying, edits, calls, org in found:
        org = org if with_org else None
        if (org, iid, int(revision)) in have:
            continue
        stratum = stratum_of(int(activity.get((org, user), 0))) if config.strata else ALL
        rows.append(Row(iid, int(revision), user, arm, _utc(t_open), now,
                        None if reward is None else float(reward), stratum, int(invalid or 0),
                        int(clarifying or 0), int(edits or 0), int(calls or 0),
                        org_id=org))  # fmt: skip
    return rows


def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def live_canaries(registry: CheckpointRegistry) -> list[CheckpointInfo]:
    return [info for info in registry.list() if info.status == CANARY]


def expired(info: CheckpointInfo, config: CanaryConfig, now: datetime) -> bool:
    """Whether the canary's deadline, counted from its registration, has passed."""
    started = datetime.fromisoformat(info.created_at.replace("Z", "+00:00"))
    return now >= started + timedelta(hours=config.deadline_hours)


def look(registry: CheckpointRegistry, catalog: Path, candidate: str,
         thresholds: MonitorThresholds | None = None,
         now: datetime | None = None) -> CanaryVerdict:  # fmt: skip
    """One look at ``candidate``'s canary: judge it and record the verdict (and the outcome),
    and its evidence beside it (``release.canary_evidence``), so the decision can be re-run
    (``rtrl canary evaluate --checkpoint``). With nothing new since the last recorded look (and
    the deadline not passed), nothing is recorded: the verdict returned has ``new_data``
    False."""
    info = registry.get(candidate)
    if info.status != CANARY:
        raise ValueError(f"{candidate} is {info.status}, not a live canary")
    stage = dict(info.evals["canary"])
    config = CanaryConfig.model_validate(stage["config"])
    now = now or datetime.now(UTC)
    started = datetime.fromisoformat(info.created_at.replace("Z", "+00:00"))
    path = info.file(EVIDENCE_FILE)
    known = read_evidence(path)[1] if path.exists() else []
    rows = live_rows(catalog, stage["experiment"], config, started, known, now)
    thresholds = thresholds or MonitorThresholds()
    past = expired(info, config, now)
    last = stage["verdicts"][-1] if stage["verdicts"] else None
    verdict = look_at(rows, now, started, config, thresholds, int(stage["looks"]) + 1)
    if not past and last is not None and last.get("seen") == verdict.seen:
        why = f"no new data since look {stage['looks']}: no look taken"
        return replace(verdict, look=int(stage["looks"]), reasons=(why, *verdict.reasons),
                       new_data=False)  # fmt: skip
    times = [v["at"] for v in stage["verdicts"] if "at" in v] + [now.isoformat()]
    header = Header(experiment=stage["experiment"], candidate=candidate, started_at=started,
                    look_times=times, shares=[Share(since=started, percent=config.percent)],
                    config=stage["config"])  # fmt: skip
    write_evidence(path, header, rows)
    stage["looks"] = verdict.look
    stage["verdicts"] = [*stage["verdicts"], {**verdict.to_json(), "at": now.isoformat()}]
    stage["evidence"] = EVIDENCE_FILE
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
