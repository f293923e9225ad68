"""The list of forgotten users, kept in the warehouse root so every writer honours it.

``rtrl forget`` adds a user, ``(org_id, user_id)``, and the interactions that were theirs here
before it deletes their rows; the sink and the batch builder read it and drop those rows, so a
record that reaches Kafka after the deletion (a late revision, a replay) never lands again.
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
    pairs = lambda name: frozenset((o, v) for o, v in data.get(name, ()))  # noqa: E731
    return Forgotten(
        frozenset(data.get("user_ids", ())),
        frozenset(data.get("interaction_ids", ())),
        pairs("org_users"),
        pairs("org_interactions"),
        frozenset(data.get("orgs", ())),
    )


def add_forgotten(store: Store, org_id: str, user_id: str | None,
                  interaction_ids: set[str]) -> Forgotten:  # fmt: skip
    """Record that ``(org_id, user_id)`` (and their interactions) must never be stored again;
    ``user_id`` None: the whole organisation, every row of it."""
    old = load_forgotten(store)
    new = Forgotten(
        old.user_ids,
        old.interaction_ids,
        old.org_users | ({(org_id, user_id)} if user_id is not None else set()),
        old.org_interactions | {(org_id, i) for i in interaction_ids},
        old.orgs | ({org_id} if user_id is None else set()),
    )
    body = {
        "user_ids": sorted(new.user_ids),
        "interaction_ids": sorted(new.interaction_ids),
        "org_users": sorted(new.org_users),
        "org_interactions": sorted(new.org_interactions),
        "orgs": sorted(new.orgs),
    }
    store.write_bytes(FORGOTTEN_FILE, orjson.dumps(body))
    return new
