"""Two organisations sending the same interaction id, user id and event ids stay apart in the
marts: two reward rows, two outcome rows, two A/B units, and batches that claim per organisation.
"""

from __future__ import annotations

from datetime import UTC, datetime

import duckdb
import orjson

from rewards.config import RewardConfig
from rewards.function import compute_record
from tests.support.warehouse import land
from tests.warehouse.support import fixture_events
from warehouse.batches import build_batches
from warehouse.catalog import build_catalog
from warehouse.settings import BuildConfig
from warehouse.store import Store


def _org_events() -> dict[str, list[dict]]:
    """Org 1: the fixture's C1 (an edit accepted and 80 % kept, 2 s). Org 2: the very same ids,
    user and arm, but the edit rejected and 9 s."""
    c1 = [e for e in fixture_events() if e["interaction_id"] == "C1"]
    other = []
    for event in c1:
        event = {**event, "org_id": "org-2"}
        if event["type"] == "edit.accepted":
            event["type"] = "edit.rejected"
        if event["type"] == "interaction.completed":
            event["payload"] = {**event["payload"], "latency_ms": 9000}
        other.append(event)
    return {"org-1": c1, "org-2": other}


def _landed(tmp_path, orgs: tuple[str, ...] = ("org-1", "org-2")) -> tuple[Store, str]:
    """Every organisation's events; the reward records of ``orgs`` (one partition each)."""
    store = Store(str(tmp_path))
    by_org = _org_events()
    land(store, "events", [e for events in by_org.values() for e in events])
    for partition, org in enumerate(orgs):
        record = compute_record(by_org[org], RewardConfig()).to_json_dict()
        land(store, "rewards", [record], partition=partition + 1)
    return store, build_catalog(store)


def test_the_marts_keep_two_organisations_with_one_interaction_id_apart(tmp_path) -> None:
    _, db = _landed(tmp_path)
    with duckdb.connect(db, read_only=True) as con:
        rewards = con.sql(
            "SELECT org_id, interaction_id, user_id, n_accepted FROM rewards ORDER BY org_id"
        ).fetchall()
        outcomes = con.sql(
            "SELECT org_id, latency_ms, n_accepted_edits, kept_sum FROM interaction_outcomes "
            "ORDER BY org_id"
        ).fetchall()
        units = con.sql(
            "SELECT org_id, user_id, n_interactions, n_completed, latency_sum, kept_sum "
            "FROM ab_units ORDER BY org_id"
        ).fetchall()
        n_users = con.sql("SELECT n_users FROM ab_arms").fetchall()
    assert rewards == [("org-1", "C1", "uc1", 1), ("org-2", "C1", "uc1", 0)]
    assert outcomes == [("org-1", 2000, 1, 0.8), ("org-2", 9000, 0, 0.0)]
    assert units == [("org-1", "uc1", 1, 1, 2000, 0.8), ("org-2", "uc1", 1, 1, 9000, 0.0)]
    assert n_users == [(2,)]


def test_a_batch_claims_an_interaction_of_its_own_organisation_only(tmp_path) -> None:
    config = BuildConfig(min_rows=1, settle_s=0)
    now = datetime(2026, 12, 1, tzinfo=UTC)
    store, db = _landed(tmp_path, orgs=("org-1",))
    first = build_batches(store, config, db=db, now=now)
    assert [(e.n_rows, e.offered) for e in first] == [(1, True)]
    _, db = _landed(tmp_path)  # org 2's record of the same id lands later
    second = build_batches(store, config, db=db, now=now)
    assert [(e.n_rows, e.offered) for e in second] == [(1, True)]
    with duckdb.connect(db, read_only=True) as con:
        lineage = con.sql("SELECT org_id, interaction_id FROM lineage ORDER BY 1").fetchall()
    assert lineage == [("org-1", "C1"), ("org-2", "C1")]
    assert build_batches(store, config, db=db, now=now) == []  # each claimed once


def test_a_candidate_with_one_id_in_two_organisations_passes_quality(tmp_path) -> None:
    store, db = _landed(tmp_path)
    now = datetime(2026, 12, 1, tzinfo=UTC)
    batches = build_batches(store, BuildConfig(min_rows=1, settle_s=0), db=db, now=now)
    assert [(e.n_rows, e.offered) for e in batches] == [(2, True)]


def _batched_rollouts(tmp_path, orgs: tuple[str, ...], stamped: tuple[str | None, ...]):
    """Each organisation's batched row of C1 and the completion ids of the rollout it joined:
    one rollout of C1 per entry of ``stamped`` (its ``org_id``; None as written before
    rollouts carried one), completion ids ``[k]`` for the k-th."""
    store, _ = _landed(tmp_path, orgs)
    checkpoint = _org_events()["org-1"][0]["checkpoint_id"]
    rollouts = [{"interaction_id": "C1", "checkpoint_id": checkpoint, "completion_ids": [k]}
                | ({} if org is None else {"org_id": org})
                for k, org in enumerate(stamped)]  # fmt: skip
    land(store, "rollouts", rollouts)
    db = build_catalog(store)
    now = datetime(2026, 12, 1, tzinfo=UTC)
    entries = build_batches(store, BuildConfig(min_rows=1, settle_s=0), db=db, now=now)
    rows = [row for e in entries for row in store.read_parquet(e.files[0]).to_dicts()]
    return {
        r["org_id"]: r["rollout_json"] and orjson.loads(r["rollout_json"])["completion_ids"]
        for r in rows
    }


def test_each_organisation_trains_on_its_own_rollout_of_one_interaction_id(tmp_path) -> None:
    """The gateway stamps a rollout with its API key's organisation: two organisations' same
    interaction id join their own tokens, never the other's (nor both)."""
    got = _batched_rollouts(tmp_path, ("org-1", "org-2"), ("org-2", "org-1"))
    assert got == {"org-1": [1], "org-2": [0]}


def test_a_rollout_written_before_tenancy_joins_the_one_organisation_using_its_id(
    tmp_path,
) -> None:
    assert _batched_rollouts(tmp_path / "one", ("org-1",), (None,)) == {"org-1": [0]}
    # an id two organisations use: nothing tells whose it was, so it trains neither
    both = _batched_rollouts(tmp_path / "two", ("org-1", "org-2"), (None,))
    assert both == {"org-1": None, "org-2": None}
