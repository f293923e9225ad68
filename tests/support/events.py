"""Events an editor plugin reports, built for tests that feed the warehouse directly."""

from __future__ import annotations


def events_of(interaction: str, user: str, checkpoint: str, experiment: str | None,
              accepted: bool, n: int) -> list[dict]:  # fmt: skip
    """What the editor plugin reports of one served completion: the edit and its fate."""
    name, _, arm = (experiment or "").partition(":")
    base = {
        "schema_version": 1,
        "interaction_id": interaction,
        "org_id": "acme",
        "user_id": user,
        "session_id": f"s-{user}",
        "checkpoint_id": checkpoint,
        **({"experiment": {"name": name, "arm": arm}} if experiment else {}),
    }
    steps = [
        ("interaction.started", {"mode": "agent"}),
        ("agent.edit_proposed", {"edit_id": "e1", "lines_added": 3, "lines_removed": 0}),
        ("edit.accepted" if accepted else "edit.rejected", {"edit_id": "e1"}),
        ("interaction.completed", {"latency_ms": 900, "output_tokens": 2}),
    ]
    out = []
    for k, (kind, payload) in enumerate(steps):
        ts = f"2026-12-01T10:{n // 60 % 60:02d}:{n % 60:02d}.{k:06d}Z"
        out.append({**base, "event_id": f"{interaction}-{k}", "type": kind, "ts": ts,
                    "received_at": ts, "payload": payload})  # fmt: skip
    return out
