"""Two organisations that send the same interaction and user ids stay apart in the monitors:
an interaction is (org_id, interaction_id) and a user (org_id, user_id)."""

from __future__ import annotations

import polars as pl

from rewards.monitors import checkpoint_rates


def records(org: str, invalid: bool) -> pl.DataFrame:
    """Four interactions of two users, the same ids whatever the organisation."""
    return pl.DataFrame({
        "interaction_id": ["i1", "i2", "i3", "i4"],
        "org_id": [org] * 4,
        "user_id": ["u1", "u1", "u2", "u2"],
        "session_id": ["s1", "s2", "s3", "s4"],
        "revision": [0] * 4,
        "checkpoint_id": ["c"] * 4,
        "status": ["scored"] * 4,
        "n_edits": [0] * 4,
        "n_clarifying": [0] * 4,
        "n_invalid_tool_calls": [1 if invalid else 0] * 4,
        "n_subagents": [0] * 4,
        "n_subagents_unused": [0] * 4,
    })  # fmt: skip


def test_the_same_ids_in_two_organisations_are_two_interactions_and_two_users() -> None:
    rates = checkpoint_rates(pl.concat([records("org-a", True), records("org-b", False)]), "c")
    assert rates.n_interactions == 8  # not 4: neither organisation's records replace the other's
    ratio = rates.ratios["invalid_tool_call_rate"]
    assert ratio.users == 4 and ratio.value == 0.5


def test_a_separator_in_an_id_does_not_join_two_users() -> None:
    a, b = records("o/x", True), records("o", False)  # "o/x"+"u1" and "o"+"x/u1"
    b = b.with_columns(pl.lit("x/u1").alias("user_id"))
    a = a.with_columns(pl.lit("u1").alias("user_id"))
    rates = checkpoint_rates(pl.concat([a, b]), "c")
    assert rates.ratios["invalid_tool_call_rate"].users == 2
