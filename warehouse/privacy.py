"""The list of forgotten users, kept in the warehouse root so every writer honours it.

``rtrl forget`` adds a user (and the interactions that were theirs) here before it deletes their
rows; the sink and the batch builder read it and drop those rows, so a record that reaches Kafka
after the deletion (a late revision, a replay) never lands again.
"""

from __future__ import annotations

import orjson

from warehouse.encode import Forgotten
from warehouse.layout import PRIVACY_DIR, join
from warehouse.store import Store

FORGOTTEN_FILE = join(PRIVACY_DIR, "forgotten.json")


def load_forgotten(store: Store) -> Forgotten:
    raw = store.read_bytes(FORGOTTEN_FILE)
    if raw is None:
        return Forgotten()
    data = orjson.loads(raw)
    return Forgotten(
        frozenset(data.get("user_ids", ())), frozenset(data.get("interaction_ids", ()))
    )


def add_forgotten(store: Store, user_id: str, interaction_ids: set[str]) -> Forgotten:
    """Record that ``user_id`` (and these interactions) must never be stored again."""
    old = load_forgotten(store)
    new = Forgotten(old.user_ids | {user_id}, old.interaction_ids | frozenset(interaction_ids))
    body = {"user_ids": sorted(new.user_ids), "interaction_ids": sorted(new.interaction_ids)}
    store.write_bytes(FORGOTTEN_FILE, orjson.dumps(body))
    return new
