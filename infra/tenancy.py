"""One id scoped by its organisation: the key every tenant's data is kept and assigned under.

Interaction and user ids are chosen by clients, so two organisations may send the same one. The
organisation's length leads, so no two (org, id) pairs give one key. It lives at the ground
floor, free of polars, because the gateway needs it on every request (a user's arm and run
memory are its organisation's); the stream's state and the gate's units are keyed with it too,
and the warehouse and the rewards' frames spell the same key (``rewards.tenant_keys.org_scoped``).
"""

from __future__ import annotations


def scoped_key(org_id: str | None, value: str) -> str:
    """``value`` prefixed by its organisation; bare without one (records from before tenancy).

    >>> scoped_key("a:b", "c"), scoped_key("a", "b:c"), scoped_key(None, "c")
    ('3:a:b/c', '1:a/b:c', 'c')
    """
    return value if org_id is None else f"{len(org_id)}:{org_id}/{value}"
