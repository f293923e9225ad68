"""A reward record read as a GenAI evaluation: name, score, label, explanation, the response.

Pure: the same record always gives the same evaluation, whatever the target (OTLP logs or
Phoenix annotations) writes it as. What links it to the evaluated model call: the record carries
``interaction_id`` and no trace or span id (nor does a rollout: it names its chat call's
response id, ``turn.call_id``, but no trace context), so ``gen_ai.response.id`` is the
interaction id: one agent turn as the team's spans and events name it
(``docs/contracts/otel-export-v1.md``). A privacy-mode record is not exported at all: such an
interaction keeps only counts.
"""

from __future__ import annotations

from dataclasses import dataclass

from rewards.record import CENSORED, PRIVACY_MODE, TERM_FIELDS, RewardRecord

# Low-cardinality labels: the sign of the reward, or why there is none.
POSITIVE = "positive"
NEGATIVE = "negative"
NEUTRAL = "neutral"
CENSORED_LABEL = "censored"

# Why a record on `rewards` is not exported (each counted under its code).
SKIP_PRIVACY = "privacy_mode"
SKIP_TOMBSTONE = "tombstone"  # `rtrl forget` cleared the interaction
SKIP_MALFORMED = "malformed"  # not a reward record of spec v1


@dataclass(frozen=True, slots=True)
class Evaluation:
    """One reward as a ``gen_ai.evaluation.result``; ``score`` None when censored."""

    name: str
    score: float | None
    label: str
    explanation: str
    response_id: str
    interaction_id: str
    revision: int
    reward_version: str
    checkpoint_id: str | None
    terms: tuple[tuple[str, float], ...]  # (term, value), empty when censored
    time_unix_nano: int  # the end of the evaluated window (t_close)


def skip_reason(record: RewardRecord) -> str | None:
    """Why this record is not exported, or None."""
    return SKIP_PRIVACY if record.censor_reason == PRIVACY_MODE else None


def label_of(record: RewardRecord) -> str:
    """The reward's sign, or ``censored``: a label a dashboard can group by."""
    if record.status == CENSORED or record.reward is None:
        return CENSORED_LABEL
    if record.reward > 0:
        return POSITIVE
    if record.reward < 0:
        return NEGATIVE
    return NEUTRAL


def number(value: float) -> str:
    """A term as the explanation writes it: at most 6 significant digits, no trailing zeros.

    >>> number(1.0), number(-0.25), number(-0.0123456789), number(0.0)
    ('1', '-0.25', '-0.0123457', '0')
    """
    return format(value + 0.0, ".6g")


def explanation_of(record: RewardRecord) -> str:
    """The reward's terms and what they counted, in one line a person reads beside the span."""
    where = f"reward {record.reward_version} revision {record.revision}"
    if record.status == CENSORED or record.reward is None:
        return f"censored ({record.censor_reason}): no outcome signal in the window; {where}"
    terms = " + ".join(f"{name} {number(float(getattr(record, name) or 0.0))}"
                       for name in TERM_FIELDS)  # fmt: skip
    counts = (
        f"{record.n_edits} edits ({record.n_accepted} accepted, {record.n_rejected} rejected, "
        f"{record.n_reverted} reverted), {record.n_tool_calls} tool calls "
        f"({record.n_invalid_tool_calls} invalid), "
        f"{record.n_clarifying} clarifying questions"
        + (", dissatisfied follow-up" if record.dissatisfied else "")
    )
    return f"reward {number(record.reward)} = {terms}; {counts}; {where}"


def evaluate(record: RewardRecord, name: str) -> Evaluation:
    """The evaluation of one (not skipped) record."""
    censored = record.status == CENSORED or record.reward is None
    terms = () if censored else tuple(
        (term, float(getattr(record, term) or 0.0)) for term in TERM_FIELDS
    )  # fmt: skip
    return Evaluation(
        name=name,
        score=None if censored else record.reward,
        label=label_of(record),
        explanation=explanation_of(record),
        response_id=record.interaction_id,
        interaction_id=record.interaction_id,
        revision=record.revision,
        reward_version=record.reward_version,
        checkpoint_id=record.checkpoint_id,
        terms=terms,
        time_unix_nano=_unix_nano(record),
    )


def _unix_nano(record: RewardRecord) -> int:
    t = record.t_close
    return int(t.timestamp()) * 1_000_000_000 + t.microsecond * 1_000
