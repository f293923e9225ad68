"""`rtrl run --world orgs` end to end on the tiny model: three organisations send the same user
ids through keys of their own; each organisation's line is trained and judged on its own users
only, as its own first attempt on the shared checkpoint.

The gate is opened (``--train-options``), so every line is promoted and served, and the closing
A/B runs per organisation: the tiny model writes no code, so this tests the plumbing, not the
learning (SmolLM2's run in bench/RESULTS.md, "The orgs world", is where lines learn). Its first
run found the closing A/B crashing on an arm without an edit; the rate is now reported as
undefined."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from checkpoints.store import CheckpointRegistry
from tests.support.kafka import free_port_block
from tests.support.rtrl_run import run_rtrl

# promote whatever trains, however little it learned (the tiny model writes no code): the lines
# are served and the closing A/B per organisation runs
OPEN_GATE = "--min-gain -1000"


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_each_organisation_is_served_trained_and_judged_on_its_own_users(tmp_path: Path) -> None:
    kafka_port, http_port = free_port_block(2), free_port_block(2)  # collector, gateway
    done = run_rtrl(
        ["--world", "orgs", "--model", "tiny", "--engine", "transformers", "--rounds", "1",
         "--round-users", "24", "--ab-users", "8", "--window-s", "4", "--max-tokens", "24",
         "--gate-eval-samples", "1", "--train-options", OPEN_GATE, "--port", str(kafka_port),
         "--collector-port",
         str(http_port), "--gateway-port", str(http_port + 1), "--seed", "1"],
        tmp_path, timeout_s=540)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = json.loads((tmp_path / "orgs.json").read_text())
    sizes = {o["org"]: o["users_per_round"] for o in summary["orgs"]}
    assert sizes == {"acme": 24, "globex": 12, "initech": 6}
    assert "orgs world: each organisation's rounds" in done.stdout

    with duckdb.connect(str(tmp_path / "warehouse" / "warehouse.duckdb"), read_only=True) as con:
        per_org = dict(con.execute("select org_id, count(*) from rewards where status = "
                                   "'scored' and experiment_name is null group by 1"
                                   ).fetchall())  # fmt: skip
        shared_ids = con.execute("select count(distinct org_id) from rewards "
                                 "where user_id = 'u_code0000'").fetchone()  # fmt: skip
        closing = con.execute("select experiment_name, org_id, count(*) from rewards where "
                              "experiment_name is not null group by 1, 2").fetchall()  # fmt: skip
    assert per_org == sizes  # every round's interaction landed once, under its organisation
    assert shared_ids == (3,)  # one user id, three organisations: three people's records

    registry = CheckpointRegistry(tmp_path / "checkpoints")
    candidates = {i.org_id: i for i in registry.list() if i.parent is not None}
    assert set(candidates) == set(sizes)  # a candidate per line, none on the shared one
    for org, info in candidates.items():
        evals = info.evals
        # trained and judged on its own users' interactions, every one of them
        assert evals["n_train"] + evals["n_held_out"] == sizes[org], (org, evals)
        assert evals["skipped"].get("other_organisation") == sum(sizes.values()) - sizes[org]
        assert evals["gate"]["attempt"] == 1  # its own line's first attempt on the parent
        assert info.parent == info.shared_base == "tiny-0000"
    rounds = {o["org"]: o["rounds"] for o in summary["orgs"]}
    assert all(r[0]["candidate"] == candidates[org].checkpoint_id for org, r in rounds.items())

    # the closing A/B per organisation: its promoted line against the shared checkpoint, on its
    # own users only (two asks each), recorded under its organisation and reported on them
    ab_users = {"acme": 8, "globex": 4, "initech": 2}  # --ab-users 8 at each one's share
    assert sorted(closing) == sorted((f"final-ab-{o}", o, 2 * n) for o, n in ab_users.items())
    for ab in summary["closing"]:
        org = ab["org"]
        assert (ab["control"], ab["treatment"]) == ("tiny-0000", candidates[org].checkpoint_id)
        assert sum(arm["answers"] for arm in ab["arms"].values()) == 2 * ab_users[org]
        assert ab["convention_met"] is None  # no code in either arm: no rate, and no crash
        kept = next(r for r in ab["report"]["rows"] if r["metric"] == "kept_per_interaction")
        assert (kept["experiment"], kept["n_interactions"]) == (
            f"final-ab-{org}",
            ab["arms"]["treatment"]["answers"],
        )
