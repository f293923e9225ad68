"""The one reward function of spec v1: all events of one interaction in, one record out.

The stream worker and the batch replay both call :func:`compute_record`, so a reward computed live
and one recomputed from the archive are the same record. It is pure and order-free: the result
depends on the *set* of copies it is given, never on their arrival order.

Readings of the spec made here:

* Two copies with the same ``event_id`` *and* the same ``received_at`` are one physical copy
  delivered twice (a Kafka redelivery after a crash): they collapse and are not a duplicate. This
  makes the function idempotent under at-least-once delivery. (Should two such copies differ in
  content, the one with the smallest canonical JSON is kept, so the choice stays order-free.)
* Each distinct ``event_id`` is classified by its first copy: in-window, late or expired. The other
  copies count in ``n_duplicates`` unless they themselves are expired.
* ``privacy_mode`` and the identity fields are read from in-window events only (a late event
  changes no term, and the spec says "any event in the window").
* Each identity field (``org_id``, ``user_id``, ``session_id``, ``checkpoint_id``, and the
  ``experiment`` as one object) comes from the first event in (ts, event_id) order carrying it.
* A privacy-mode record has ``dissatisfied`` None: it is a judgement, not an id or a count.
* ``r_edit`` sums exactly (``math.fsum``), and the reward rounds half-to-even on the binary value
  (Python's ``round``), so no summation order can change a digit.
* Events are trusted to be valid per events-v1 (the collector validated them). A payload may
  carry extra keys set to None (a columnar reader fills absent struct fields), which are ignored.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from operator import itemgetter
from typing import Any

import orjson

from rewards import terms
from rewards.config import RewardConfig
from rewards.record import CENSORED, NO_OUTCOME, PRIVACY_MODE, SCORED, RewardRecord
from rewards.timestamps import US_PER_S, canonical, format_us, to_datetime, to_us

Event = Mapping[str, Any]

# Edit events that refer to a proposed edit; one whose edit_id was never proposed is an orphan.
_EDIT_DECISIONS = {"edit.accepted": terms.ACCEPTED, "edit.rejected": terms.REJECTED}
_EDIT_EVENTS = frozenset({"edit.accepted", "edit.rejected", "edit.reverted", "edit.retention"})
_TS_THEN_ID = itemgetter(0, 1)
_IDENTITY_FIELDS = ("org_id", "user_id", "session_id", "checkpoint_id")
# Outcome signals that do not depend on an edit.
_OUTCOME_TYPES = frozenset(
    {"followup.sent", "agent.tool_call", "agent.clarifying_question", "interaction.completed"}
)


def compute_record(
    events: Iterable[Event], config: RewardConfig, revision: int = 0
) -> RewardRecord:
    """The reward record of one interaction from every copy of its events seen so far.

    >>> base = {"schema_version": 1, "interaction_id": "i1", "session_id": "s", "user_id": "u",
    ...         "org_id": "o", "checkpoint_id": "c1"}
    >>> def ev(eid, type_, t, payload):
    ...     return {**base, "event_id": eid, "type": type_, "ts": t, "received_at": t,
    ...             "payload": payload}
    >>> events = [
    ...     ev("e1", "interaction.started", "2026-11-30T10:00:00Z", {}),
    ...     ev("e2", "agent.edit_proposed", "2026-11-30T10:00:05Z",
    ...        {"edit_id": "x", "lines_added": 3, "lines_removed": 0}),
    ...     ev("e3", "edit.accepted", "2026-11-30T10:00:09Z", {"edit_id": "x"}),
    ...     ev("e4", "interaction.completed", "2026-11-30T10:00:06Z",
    ...        {"latency_ms": 5000, "output_tokens": 80}),
    ... ]
    >>> rec = compute_record(events + [dict(events[2], received_at="2026-11-30T10:01:00Z")],
    ...                      RewardConfig())
    >>> rec.status, rec.reward, rec.r_edit, rec.r_latency, rec.n_duplicates
    ('scored', 0.95, 1.0, -0.05, 1)
    >>> rec.event_ids
    ('e1', 'e2', 'e4', 'e3')
    """
    # Instants travel as canonical strings, which compare as the instants do (see canonical()).
    first_copies, copy_times, interaction_id = _collect_copies(events)
    t_open_us = to_us(min(first[0] for first in first_copies.values()))
    t_close_us = t_open_us + config.window_s * US_PER_S
    t_close = format_us(t_close_us)
    t_expired = format_us(t_close_us + config.late_s * US_PER_S)

    in_window: list[tuple[str, str, Event]] = []
    n_late = n_duplicates = 0
    for event_id, (received, event) in first_copies.items():
        copies = copy_times.get(event_id)
        if copies is not None:  # more than one arrival time: the others are duplicates
            n_duplicates += sum(1 for t in copies if t != received and t < t_expired)
        if received < t_close:
            in_window.append((canonical(event["ts"]), event_id, event))
        elif received < t_expired:
            n_late += 1
    in_window.sort(key=_TS_THEN_ID)
    ordered = [item[2] for item in in_window]

    return _build_record(
        ordered,
        config,
        interaction_id=interaction_id,
        revision=revision,
        t_open=t_open_us,
        t_close=t_close_us,
        n_late=n_late,
        n_duplicates=n_duplicates,
    )


def _collect_copies(
    events: Iterable[Event],
) -> tuple[dict[str, tuple[str, Event]], dict[str, set[str]], str]:
    """Per event_id: its first-received copy; per event_id seen at several arrival times, those."""
    first: dict[str, tuple[str, Event]] = {}
    times: dict[str, set[str]] = {}
    interaction_id: str | None = None
    for event in events:
        if interaction_id is None:
            interaction_id = event["interaction_id"]
        elif event["interaction_id"] != interaction_id:
            raise ValueError(
                f"events of two interactions: {interaction_id!r} and {event['interaction_id']!r}"
            )
        event_id = event["event_id"]
        received = canonical(event["received_at"])
        known = first.get(event_id)
        if known is None:
            first[event_id] = (received, event)
            continue
        times.setdefault(event_id, {known[0]}).add(received)
        if received < known[0] or (
            received == known[0] and _canonical(event) < _canonical(known[1])
        ):
            first[event_id] = (received, event)
    if interaction_id is None:
        raise ValueError("an interaction without events has no record")
    return first, times, interaction_id


def _canonical(event: Event) -> bytes:
    """Only for the rare tie of one event_id and one received_at with different contents."""
    return orjson.dumps(event, option=orjson.OPT_SORT_KEYS, default=str)


def _first_carried(ordered: list[Event], key: str) -> Any:
    """The value of ``key`` in the first event (in window order) that carries it."""
    for event in ordered:
        value = event.get(key)
        if value is not None:
            return value
    return None


def _build_record(
    ordered: list[Event],
    config: RewardConfig,
    *,
    interaction_id: str,
    revision: int,
    t_open: int,
    t_close: int,
    n_late: int,
    n_duplicates: int,
) -> RewardRecord:
    """Terms, status and counts from the in-window events in (ts, event_id) order."""
    proposed = {
        event["payload"]["edit_id"] for event in ordered if event["type"] == "agent.edit_proposed"
    }
    decision: dict[str, tuple[str, int]] = {}
    last_revert: dict[str, int] = {}
    retained: dict[str, float] = {}
    n_orphans = n_tool_calls = n_invalid = n_clarifying = n_subagents = n_unused = 0
    dissatisfied = has_outcome = False
    latency_ms: int | None = None
    identity = {key: _first_carried(ordered, key) for key in _IDENTITY_FIELDS}
    experiment = _first_carried(ordered, "experiment")
    privacy = any(event.get("privacy_mode") for event in ordered)

    for index, event in enumerate(ordered):
        kind = event["type"]
        payload = event["payload"]
        if kind in _EDIT_EVENTS:
            edit_id = payload["edit_id"]
            if edit_id not in proposed:
                n_orphans += 1
                continue
            has_outcome = True
            if kind == "edit.reverted":
                last_revert[edit_id] = index
            elif kind == "edit.retention":
                retained[edit_id] = payload["retained_fraction"]
            else:
                decision[edit_id] = (_EDIT_DECISIONS[kind], index)
            continue
        if kind in _OUTCOME_TYPES:
            has_outcome = True
        if kind == "agent.tool_call":
            n_tool_calls += 1
            n_invalid += payload["valid"] is False
        elif kind == "agent.clarifying_question":
            n_clarifying += 1
        elif kind == "agent.subagent_finished":
            n_subagents += 1
            n_unused += payload["contributed"] is False
        elif kind == "followup.sent":
            dissatisfied = dissatisfied or payload["dissatisfied"] is True
        elif kind == "interaction.completed":
            latency_ms = payload["latency_ms"]

    scores = []
    n_accepted = n_rejected = n_reverted = 0
    for edit_id in sorted(proposed):
        verdict, decided_at = decision.get(edit_id, (None, -1))
        reverted = verdict == terms.ACCEPTED and last_revert.get(edit_id, -1) > decided_at
        n_accepted += verdict == terms.ACCEPTED
        n_rejected += verdict == terms.REJECTED
        n_reverted += reverted
        scores.append(terms.edit_score(verdict, reverted, retained.get(edit_id), config))

    if privacy:
        status, censor_reason = CENSORED, PRIVACY_MODE
    elif has_outcome:
        status, censor_reason = SCORED, None
    else:
        status, censor_reason = CENSORED, NO_OUTCOME
    term_values: tuple[float | None, ...] = (None,) * 5
    reward = None
    if status == SCORED:
        term_values = (
            terms.r_edit(scores),
            terms.r_followup(dissatisfied, config),
            terms.r_tool(n_invalid, config),
            terms.r_clarify(n_clarifying, len(proposed), config),
            terms.r_latency(latency_ms, config),
        )
        if config.writes_off(n_invalid, len(proposed)):
            term_values = (0.0,) * 5
        reward = terms.total(term_values, config)  # type: ignore[arg-type]

    return RewardRecord(
        interaction_id=interaction_id,
        revision=revision,
        reward_version=config.reward_version,
        status=status,
        censor_reason=censor_reason,
        reward=reward,
        r_edit=term_values[0],
        r_followup=term_values[1],
        r_tool=term_values[2],
        r_clarify=term_values[3],
        r_latency=term_values[4],
        org_id=identity["org_id"],
        user_id=None if privacy else identity["user_id"],
        session_id=identity["session_id"],
        checkpoint_id=identity["checkpoint_id"],
        experiment_name=experiment.get("name") if experiment else None,
        experiment_arm=experiment.get("arm") if experiment else None,
        t_open=to_datetime(t_open),
        t_close=to_datetime(t_close),
        n_events=len(ordered),
        n_duplicates=n_duplicates,
        n_late=n_late,
        n_orphans=n_orphans,
        n_edits=len(proposed),
        n_accepted=n_accepted,
        n_rejected=n_rejected,
        n_reverted=n_reverted,
        n_tool_calls=n_tool_calls,
        n_invalid_tool_calls=n_invalid,
        n_clarifying=n_clarifying,
        n_subagents=n_subagents,
        n_subagents_unused=n_unused,
        dissatisfied=None if privacy else dissatisfied,
        event_ids=tuple(event["event_id"] for event in ordered),
    )
