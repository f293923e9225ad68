"""`rtrl forget`: one organisation's user, or (``--whole-org``) the organisation, removed from
the warehouse and the rewards topic; for a whole organisation, its own checkpoint line too, and
the shared checkpoints it helped train named (``checkpoints.forget_line`` states the rule)."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable

from checkpoints.forget_line import forget_line
from checkpoints.store import CheckpointRegistry
from infra.topics import TopicNames
from warehouse.batches import list_batches
from warehouse.cli_options import ForgetOptions
from warehouse.forget import ForgetResult, forget, forget_org
from warehouse.open_store import open_store
from warehouse.store import Store
from warehouse.tombstones import TombstoneError, tombstone_rewards


def run_forget(options: ForgetOptions) -> int:
    erase: Callable[[set[str]], int] | None = (
        None
        if options.skip_kafka
        else functools.partial(
            tombstone_rewards, options.bootstrap, TopicNames(options.topic_prefix).rewards
        )
    )
    if (options.user_id is None) == (not options.whole_org):
        print("rtrl forget: give --user-id (one user of --org) or --whole-org, one of them",
              file=sys.stderr)  # fmt: skip
        return 2
    store = open_store(options.root)
    try:
        if options.user_id is not None:
            result = forget(store, options.org, options.user_id, db=options.db, erase=erase)
            what = f"{options.user_id} of {options.org}"
        else:
            return _forget_org(store, options, erase)
    except TombstoneError as exc:
        print(f"rtrl forget: {exc}; no file was changed, run it again", file=sys.stderr)
        return 1
    _say(what, result, options.skip_kafka)
    return 0


def _forget_org(store: Store, options: ForgetOptions,
                erase: Callable[[set[str]], int] | None) -> int:  # fmt: skip
    registry = CheckpointRegistry(options.registry) if options.registry else None
    its_batches = batches_of(store, options.org)
    if registry is not None:  # refused before anything changes where others grow on its line
        try:
            forget_line(registry, options.org, its_batches, dry_run=True)
        except ValueError as exc:
            print(f"rtrl forget: {exc}; nothing was changed", file=sys.stderr)
            return 1
    result = forget_org(store, options.org, db=options.db, erase=erase)
    _say(f"the organisation {options.org}", result, options.skip_kafka)
    if registry is None:
        print("its checkpoints were not looked at (give --registry to remove its line)")
        return 0
    line = forget_line(registry, options.org, its_batches)
    print(f"removed its {len(line.removed)} checkpoint(s): {', '.join(line.removed) or '-'}")
    if line.shared_trained_on_it:
        print(f"kept the shared checkpoint(s) trained in part on its data: "
              f"{', '.join(line.shared_trained_on_it)} (they serve every organisation and "
              "cannot unlearn it; roll the shared line back before them and train again to "
              "remove that influence)")  # fmt: skip
    return 0


def batches_of(store: Store, org_id: str) -> set[str]:
    """The batches whose files hold a row of ``org_id`` (read before the rows are removed)."""
    found = set()
    for entry in list_batches(store):
        for relative in entry.files:
            if not store.exists(relative):
                continue
            frame = store.read_parquet(relative)
            if "org_id" in frame.columns and (frame["org_id"] == org_id).any():
                found.add(entry.batch_id)
                break
    return found


def _say(what: str, result: ForgetResult, skip_kafka: bool) -> None:
    print(f"forgot {what}: {result.rows_removed} rows in {result.files_rewritten} files, "
          f"{result.interactions} interactions, {result.erased} tombstones on the rewards "
          "topic")  # fmt: skip
    if result.shared_ids and not skip_kafka:
        print(f"rtrl forget: {result.shared_ids} of the interaction ids are also another "
              "organisation's: tombstoned under their organisation's key only, not the bare "
              "key of records written before the topic was keyed by organisation",
              file=sys.stderr)  # fmt: skip
