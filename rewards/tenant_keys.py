"""The keys of an interaction and of a user, each scoped by its organisation.

Interaction and user ids are chosen by clients, so two organisations may send the same one: the
reward spec's interaction is ``(org_id, interaction_id)``, and a user is ``(org_id, user_id)``.
A frame without ``org_id`` (older files, hand-made evidence) is keyed by the bare id.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from infra.tenancy import scoped_key


def interaction_columns(columns: Sequence[str]) -> list[str]:
    """The columns that name one interaction: ``org_id`` (when the frame has it) and its id."""
    return [c for c in ("org_id", "interaction_id") if c in columns]


def org_scoped(column: str, columns: Sequence[str]) -> pl.Expr:
    """``column``'s id prefixed by its organisation, null where the id is null.

    The organisation's length leads, so no two (org, id) pairs give one key:

    >>> frame = pl.DataFrame({"org_id": ["a:b", "a"], "user_id": ["c", "b:c"]})
    >>> frame.select(org_scoped("user_id", frame.columns))["user_id"].to_list()
    ['3:a:b/c', '1:a/b:c']
    """
    if "org_id" not in columns:
        return pl.col(column)
    org = pl.col("org_id").fill_null("")
    length = org.str.len_chars().cast(pl.String)
    return pl.concat_str([length, pl.lit(":"), org, pl.lit("/"), pl.col(column)]).alias(column)


def rewards_key(org_id: str | None, interaction_id: str) -> bytes:
    """The key of an interaction's records on the compacted ``rewards`` topic.

    Compaction keeps one record per key, so the key names the interaction, (org, id): two
    organisations' same id are two keys. A record without ``org_id`` keeps its bare id.
    """
    return scoped_key(org_id, interaction_id).encode()
