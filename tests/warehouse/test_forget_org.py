"""`rtrl forget --org O --whole-org`: every row of the organisation leaves every warehouse file,
its later rows are dropped by the sink and the batch builder, and its own checkpoint line is
removed; another organisation's same user and interaction ids, and its line, stay; the shared
checkpoint trained in part on its batches stays and is named."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import orjson
import pytest

from checkpoints.store import CheckpointRegistry
from rewards.tenant_keys import rewards_key
from rtrl.cli import main
from tests.support.checkpoints import register_variant
from tests.support.warehouse import land, records_and_events
from warehouse.batches import build_batches, list_batches
from warehouse.encode import Message, encode
from warehouse.privacy import load_forgotten
from warehouse.store import Store

NOW = datetime(2026, 12, 1, tzinfo=UTC)


def _twin(org: str) -> str:
    return f"{org}-twin"


def _orgs_rows(store: Store) -> dict[str, int]:
    """Rows by organisation, over every Parquet file of the warehouse."""
    out: dict[str, int] = {}
    for relative in store.files(""):
        frame = store.read_parquet(relative)
        if "org_id" in frame.columns:
            for org, n in frame.group_by("org_id").len().iter_rows():
                out[org] = out.get(org, 0) + n
    return out


@pytest.fixture
def landed(tmp_path: Path) -> tuple[Store, str, list[dict]]:
    """Two organisations with the same user and interaction ids, and batches of both."""
    store = Store(str(tmp_path / "wh"))
    records, events = records_and_events(120, seed=5)
    org = records[0]["org_id"]
    records = [r for r in records if r["org_id"] == org]
    events = [e for e in events if e["org_id"] == org]
    twins = [dict(r, org_id=_twin(org)) for r in records]
    land(store, "events", events + [dict(e, org_id=_twin(org)) for e in events])
    land(store, "rewards", records + twins)
    build_batches(store, now=NOW)
    return store, org, records


def test_a_whole_organisation_leaves_every_file_and_its_line_the_registry(
    landed: tuple[Store, str, list[dict]], registry: CheckpointRegistry,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    store, org, records = landed
    before = _orgs_rows(store)
    assert before[org] > 0 and before[_twin(org)] == before[org]
    batches = tuple(e.batch_id for e in list_batches(store))
    assert batches
    register_variant(registry, "t-0001", "t-0000", seed=1, batches=batches)  # shared
    register_variant(registry, "own-0001", "t-0001", seed=2, org_id=org)
    register_variant(registry, "own-0002", "own-0001", seed=3, org_id=org)
    register_variant(registry, "twin-0001", "t-0001", seed=4, org_id=_twin(org))

    code = main(["forget", "--org", org, "--whole-org", "--warehouse", store.root,
                 "--registry", str(registry.root), "--skip-kafka"])  # fmt: skip
    said = capsys.readouterr().out
    assert code == 0, said
    after = _orgs_rows(store)
    assert org not in after and after[_twin(org)] == before[_twin(org)]
    assert [c.checkpoint_id for c in registry.list()] == ["t-0000", "t-0001", "twin-0001"]
    assert "removed its 2 checkpoint(s): own-0002, own-0001" in said
    assert "kept the shared checkpoint(s) trained in part on its data: t-0001" in said

    # its late revision reaching the sink is dropped; the twin's lands
    forgotten = load_forgotten(store)
    for owner, landed_rows in ((org, 0), (_twin(org), 1)):
        late = dict(records[0], org_id=owner, revision=7)
        key = rewards_key(owner, late["interaction_id"])
        frames = encode("rewards", 0, [Message(9999, key, orjson.dumps(late), 0)], forgotten)
        assert sum(f.height for f in frames.values()) == landed_rows, owner
    # a restored file of its rows: the batch builder takes none of them
    land(store, "rewards", records, first_offset=10_000)
    taken = {row["org_id"] for e in build_batches(store, now=NOW) for f in e.files
             for row in store.read_parquet(f).to_dicts()}  # fmt: skip
    assert org not in taken
