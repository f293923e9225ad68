"""The version 1 event contract as data: envelope fields, event types and their payloads.

This table is the single source of truth: the validator walks it and the JSON Schema is rendered
from it. Limits the spec leaves open are chosen here:

- ``event_id``: 1-64 characters ``[A-Za-z0-9_.:-]`` (spec); a UUIDv7 is 36.
- ``interaction_id``: 1-128 characters (spec). Other ids (session, user, org, checkpoint, edit,
  sub-agent) and names (tool, experiment name/arm, client name/version): 1-128 characters.
- No id or name may contain control characters; ``user_id`` may not contain ``@`` either, a cheap
  guard against the one mistake the spec names (an e-mail address instead of a hash).
- Counts are integers from 0 to 2**53 - 1, exact in every JSON implementation.
- ``sent_at`` is optional: an emitter sets it when sending, and the collector corrects skew only
  when it is there. ``experiment`` needs both ``name`` and ``arm``, ``client`` both of its fields.
"""

from __future__ import annotations

from ingest.contract.fields import (
    Choice,
    Field,
    Flag,
    Integer,
    Number,
    Record,
    Text,
    Timestamp,
    Version,
)
from ingest.contract.reasons import Reason

SCHEMA_VERSION = 1
MAX_EVENT_BYTES = 65536
"""Largest serialized event accepted (bytes of UTF-8 JSON)."""

MAX_ID_LENGTH = 128
EVENT_ID_CHARS = "[A-Za-z0-9_.:-]"


def _id(description: str) -> Text:
    return Text(MAX_ID_LENGTH, description=description)


def _edit_id() -> Text:
    return _id("the edit, as named by agent.edit_proposed")


_COUNT = "an integer >= 0"

PAYLOADS: dict[str, Record] = {
    "interaction.started": Record(
        {"mode": Choice(("agent", "chat"), description="how the user asked")},
        description="the user sends a request",
    ),
    "agent.tool_call": Record(
        {
            "tool": _id("name of the tool called"),
            "valid": Flag(description="false for a malformed or impossible call"),
        },
        ("tool", "valid"),
        description="the agent called a tool",
    ),
    "agent.clarifying_question": Record(
        {}, description="the agent asked the user a question instead of acting"
    ),
    "agent.subagent_finished": Record(
        {
            "subagent_id": _id("the parallel sub-agent"),
            "contributed": Flag(description="whether its result was used"),
        },
        ("subagent_id", "contributed"),
        description="a parallel sub-agent ended",
    ),
    "agent.edit_proposed": Record(
        {
            "edit_id": _id("chosen by the emitter; later edit.* events refer to it"),
            "lines_added": Integer(description=_COUNT),
            "lines_removed": Integer(description=_COUNT),
        },
        ("edit_id", "lines_added", "lines_removed"),
        description="the agent proposed a code edit",
    ),
    "edit.accepted": Record(
        {"edit_id": _edit_id()}, ("edit_id",), description="the user accepted that edit"
    ),
    "edit.rejected": Record(
        {"edit_id": _edit_id()}, ("edit_id",), description="the user rejected it"
    ),
    "edit.reverted": Record(
        {"edit_id": _edit_id()}, ("edit_id",), description="the user undid an accepted edit"
    ),
    "edit.retention": Record(
        {
            "edit_id": _edit_id(),
            "retained_fraction": Number(0.0, 1.0, description="share of the agent's lines kept"),
            "after_s": Integer(description="seconds after acceptance of the measurement"),
        },
        ("edit_id", "retained_fraction", "after_s"),
        description="how much of the agent's lines are still in the codebase after_s seconds later",
    ),
    "followup.sent": Record(
        {"dissatisfied": Flag(description="explicit thumbs-down or the plugin's classifier")},
        ("dissatisfied",),
        description="the user's next message about this interaction",
    ),
    "interaction.completed": Record(
        {
            "latency_ms": Integer(description=_COUNT),
            "output_tokens": Integer(description=_COUNT),
        },
        ("latency_ms", "output_tokens"),
        description="the agent finished responding",
    ),
}

EVENT_TYPES: tuple[str, ...] = tuple(PAYLOADS)

# Envelope fields in the order they are checked (``payload`` last: it depends on ``type``).
# The payload entry is a placeholder; the per-type Record in PAYLOADS does the work.
ENVELOPE: dict[str, Field] = {
    "schema_version": Version(SCHEMA_VERSION, description="version of this contract"),
    "event_id": Text(
        64,
        char_class=EVENT_ID_CHARS,
        char_rule="letters, digits and _ . : - only",
        description="chosen once by the emitter (UUIDv7 recommended), reused on every retry",
    ),
    "type": Choice(EVENT_TYPES, reason=Reason.unknown_type, description="what happened"),
    "ts": Timestamp(description="when it happened, by the client's clock"),
    "sent_at": Timestamp(description="set by the emitter at send time"),
    "received_at": Timestamp(description="set by the collector on arrival, never by a client"),
    "interaction_id": _id("one agent turn; the join key"),
    "session_id": _id("editor session"),
    "user_id": Text(
        MAX_ID_LENGTH,
        char_class="[^@\\u0000-\\u001f\\u007f]",
        char_rule="a pseudonymous hash: no '@' (never an e-mail address), no control characters",
        description="pseudonymous id (a hash), never an e-mail or a name",
    ),
    "org_id": _id("tenant; must match the API key's tenant"),
    "checkpoint_id": _id("the model checkpoint that served this interaction"),
    "experiment": Record(
        {"name": _id("experiment"), "arm": _id("arm of the experiment")},
        ("name", "arm"),
        description="A/B assignment of this interaction",
    ),
    "privacy_mode": Flag(description="the user opted out of training (absent means false)"),
    "client": Record(
        {"name": _id("emitter name"), "version": _id("emitter version")},
        ("name", "version"),
        description="emitter identity",
    ),
    "payload": Record({}, description="per type"),
}

REQUIRED: tuple[str, ...] = (
    "schema_version",
    "event_id",
    "type",
    "ts",
    "interaction_id",
    "session_id",
    "user_id",
    "org_id",
    "checkpoint_id",
    "payload",
)
COLLECTOR_FIELD = "received_at"
"""Set by the collector only: forbidden from a client, required on ``telemetry.events``."""
