"""When a canary's look is taken: only when new data has landed in the warehouse, so that
polling (`rtrl canary decide --watch`) records nothing when nothing arrived; and a canary past
its deadline is ended, with the reason, on whatever data there is. On a real registry and a
real DuckDB catalog; no broker."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from checkpoints.record import CANARY, REJECTED
from release.canary_config import CanaryConfig, canary_stage
from release.canary_io import look
from rewards.config import RewardConfig
from rewards.function import compute_record
from tests.support.checkpoints import register_variant
from tests.support.events import events_of
from tests.support.warehouse import land
from warehouse.catalog import build_catalog
from warehouse.store import Store


def _land(store: Store, users: range, tag: str, seed: int) -> str:
    """Two interactions for each user, every fifth user on the canary."""
    rng = random.Random(seed)
    records = []
    for n in users:
        arm = "canary" if n % 5 == 0 else "parent"
        for k in range(2):
            events = events_of(f"{tag}-{n}-{k}", f"u{n:03d}", "t-0001" if arm == "canary"
                               else "t-0000", f"canary-t-0001:{arm}", rng.random() < 0.6,
                               2 * n + k)  # fmt: skip
            records.append(compute_record(events, RewardConfig()).to_json_dict())
    land(store, "rewards", records, partition=seed)
    return build_catalog(store)


def test_a_look_needs_new_data_and_the_deadline_ends_a_thin_canary(tmp_path, registry):
    config = CanaryConfig(percent=20, min_users=50)
    register_variant(registry, "t-0001", "t-0000", seed=1, status=CANARY,
                     evals={"canary": canary_stage("t-0001", config)})  # fmt: skip
    store = Store(str(tmp_path / "warehouse"))
    catalog = _land(store, range(60), "a", 1)

    first = look(registry, catalog, "t-0001")
    assert (first.verdict, first.look, first.new_data) == ("wait", 1, True)
    assert "12 canary users with a scored interaction; 50 needed" in first.reasons[0]

    again = look(registry, catalog, "t-0001")  # nothing landed: no look is spent
    assert (again.verdict, again.look, again.new_data) == ("wait", 1, False)
    assert again.reasons[0] == "no new data since look 1: no look taken"
    stage = registry.get("t-0001").evals["canary"]
    assert (stage["looks"], len(stage["verdicts"])) == (1, 1)

    catalog = _land(store, range(60, 90), "b", 2)  # new users landed: a look
    second = look(registry, catalog, "t-0001")
    assert (second.look, second.new_data, second.verdict) == (2, True, "wait")
    assert registry.get("t-0001").status == CANARY

    # past the deadline the same data ends it, rolled back with the reason
    later = datetime.now(UTC) + timedelta(hours=config.deadline_hours + 1)
    ended = look(registry, catalog, "t-0001", now=later)
    assert (ended.verdict, ended.look) == ("rollback", 3)
    info = registry.get("t-0001")
    assert info.status == REJECTED and info.evals["canary"]["outcome"] == "rolled_back"
    assert info.reasons[0].startswith("canary rolled back: deadline of 336 h passed: ")
    assert "18 canary users with a scored interaction; 50 needed in each arm" in info.reasons[0]
