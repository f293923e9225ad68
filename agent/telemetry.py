"""The harness's events as whole events-v1 events, each checked by the contract's validator.

An editor plugin hands type and payload to the SDK (``Client.emit``), which adds the envelope;
this is for emitters without the SDK and for tests that hold the harness to the contract. An
event that the contract refuses raises ``ContractError`` here rather than reaching a collector's
dead-letter topic.
"""

from __future__ import annotations

from collections.abc import Sequence

from agent.harness import AgentEvent
from ingest.contract import Origin, now_ts, uuid7, validate_event


def envelope(
    events: Sequence[AgentEvent],
    *,
    interaction_id: str,
    session_id: str,
    user_id: str,
    org_id: str,
    checkpoint_id: str,
    ts: str | None = None,
    experiment: dict[str, str] | None = None,
) -> list[dict[str, object]]:
    """Each event with a fresh UUIDv7 ``event_id``, ``ts`` (now unless given) and the
    interaction's identity, validated as a client would send it.

    >>> from agent.harness import Harness
    >>> harness = Harness()
    >>> events = harness.events(harness.read("Which file?"), latency_ms=5, output_tokens=3)
    >>> [e["type"] for e in envelope(events, interaction_id="i1", session_id="s1",
    ...     user_id="u1", org_id="acme", checkpoint_id="ck1")]
    ['agent.clarifying_question', 'interaction.completed']
    """
    when = ts or now_ts()
    out = []
    for event in events:
        raw: dict[str, object] = {
            "event_id": uuid7(),
            "type": event.type,
            "schema_version": 1,
            "ts": when,
            "interaction_id": interaction_id,
            "session_id": session_id,
            "user_id": user_id,
            "org_id": org_id,
            "checkpoint_id": checkpoint_id,
            "payload": dict(event.payload),
        }
        if experiment is not None:
            raw["experiment"] = dict(experiment)
        out.append(validate_event(raw, origin=Origin.client))
    return out
