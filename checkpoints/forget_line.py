"""An organisation's checkpoints when it is forgotten (`rtrl forget --org`): its own line goes,
every checkpoint of it removed with its weights; the shared checkpoints it helped train stay.

The rule for shared checkpoints, stated: a shared checkpoint trained on batches that held the
organisation's rows keeps serving every organisation. Its weights cannot unlearn those rows, and
removing it would take the checkpoint every other organisation is served from. It is named in
what ``forget_line`` returns, so that a team that must also remove that influence can roll the
shared line back to a checkpoint before it (`rtrl checkpoints rollback`) and train again without
the organisation's data, which the warehouse no longer holds. An organisation whose policy is
``own-only`` (`rtrl train --own-only`) never trained the shared line, and leaves nothing behind.
"""

from __future__ import annotations

from dataclasses import dataclass

from checkpoints.store import CheckpointRegistry


@dataclass(frozen=True)
class LineForgotten:
    removed: tuple[str, ...]  # the organisation's own checkpoints, deleted
    shared_trained_on_it: tuple[str, ...]  # shared checkpoints whose batches held its rows


def forget_line(
    registry: CheckpointRegistry, org_id: str, its_batches: set[str], dry_run: bool = False
) -> LineForgotten:
    """Remove ``org_id``'s own checkpoints (newest first, so none is left without its parent)
    and name the shared ones trained on any of ``its_batches`` (the batches that held its rows).
    Refused, before anything is removed, where another organisation's checkpoint or a shared
    one grows on one of its own (the registry refuses to register such a one: only a
    hand-edited registry holds it)."""
    every = registry.list()
    own = [c for c in every if c.org_id == org_id]
    own_ids = {c.checkpoint_id for c in own}
    orphans = [c.checkpoint_id for c in every
               if c.parent in own_ids and c.checkpoint_id not in own_ids]  # fmt: skip
    if orphans:
        raise ValueError(f"checkpoints of others grow on {org_id}'s line: {orphans}")
    shared = tuple(c.checkpoint_id for c in every
                   if c.org_id is None and set(c.batches) & its_batches)  # fmt: skip
    removed = tuple(c.checkpoint_id for c in reversed(own))
    if not dry_run:
        for checkpoint_id in removed:
            registry.remove(checkpoint_id)
    return LineForgotten(removed, shared)
