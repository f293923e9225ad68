"""Checkpoint lines: the shared line every organisation falls back to, and a line per
organisation grown on it. Pure rules over checkpoint records; the registry applies them.

* **Isolation.** An organisation's checkpoint grows on the shared line or on its own line, never
  on another organisation's; a shared checkpoint grows only on shared ones. So an adapter trained
  on one organisation's users can reach no other organisation's traffic through its lineage.
* **Borrowing strength.** An organisation's line starts from the current shared checkpoint (its
  ``shared_base``): a small organisation begins where everyone's data has taken the model.
* **Rebasing.** When the shared line moves, an organisation's line trained on an older shared
  checkpoint stops serving at once (its adapter was trained against other weights) and the
  organisation is served the new shared checkpoint; its next round trains from that checkpoint
  on its own batches. A line is therefore served only while its ``shared_base`` is the shared
  line's current checkpoint.
"""

from __future__ import annotations

from collections.abc import Iterable

from checkpoints.record import PROMOTED, CheckpointInfo


def shared_base_for(org_id: str | None, parent: CheckpointInfo | None) -> str | None:
    """The ``shared_base`` a new checkpoint of ``org_id`` trained from ``parent`` records; a
    ValueError when the lineage would cross lines.

    >>> from checkpoints.record import CheckpointInfo
    >>> ref = {"family": "llama", "base_path": "/m", "base_sha256": "0" * 64,
    ...        "tokenizer_sha256": "1" * 64}
    >>> shared = CheckpointInfo("s1", None, "/r/s1", ref, {"kind": "base"}, {},
    ...                         "2026-12-01T00:00:00Z", {}, (), "promoted", ())
    >>> mine = CheckpointInfo("a1", "s1", "/r/a1", ref, {"kind": "base"}, {},
    ...                       "2026-12-01T00:01:00Z", {}, (), "promoted", (), "acme", "s1")
    >>> shared_base_for("acme", shared), shared_base_for("acme", mine)
    ('s1', 's1')
    >>> shared_base_for("globex", mine)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: lineage: a checkpoint of 'globex' cannot grow on a1, a checkpoint of another ...
    """
    if parent is None:
        if org_id is not None:
            raise ValueError("lineage: an organisation's line grows on a shared checkpoint")
        return None
    if org_id is None:
        if parent.org_id is not None:
            raise ValueError(
                f"lineage: a shared checkpoint cannot grow on {parent.checkpoint_id}, a "
                f"checkpoint of one organisation"
            )
        return None
    if parent.org_id is None:
        return parent.checkpoint_id
    if parent.org_id != org_id:
        raise ValueError(
            f"lineage: a checkpoint of {org_id!r} cannot grow on {parent.checkpoint_id}, a "
            f"checkpoint of another organisation"
        )
    return parent.shared_base


def _latest_promoted(infos: Iterable[CheckpointInfo], org_id: str | None) -> CheckpointInfo | None:
    promoted = [i for i in infos if i.status == PROMOTED and i.org_id == org_id]
    return max(promoted, key=lambda i: (i.created_at, i.checkpoint_id), default=None)


def shared_current(infos: Iterable[CheckpointInfo]) -> CheckpointInfo | None:
    """The shared line's latest promoted checkpoint."""
    return _latest_promoted(infos, None)


def line_current(infos: Iterable[CheckpointInfo], org_id: str) -> CheckpointInfo | None:
    """The organisation's own latest promoted checkpoint, while it grows on the shared line's
    current checkpoint; None when it has none or its line is stale (the shared line moved)."""
    infos = list(infos)
    shared, own = shared_current(infos), _latest_promoted(infos, org_id)
    if own is None or shared is None or own.shared_base != shared.checkpoint_id:
        return None
    return own


def serving_for(infos: Iterable[CheckpointInfo], org_id: str | None) -> CheckpointInfo | None:
    """What serves (and trains next for) ``org_id``: its line's current checkpoint, else the
    shared one."""
    infos = list(infos)
    own = line_current(infos, org_id) if org_id is not None else None
    return own or shared_current(infos)
