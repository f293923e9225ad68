"""`rtrl run`, the README's main job, end to end: SDK -> collector -> Kafka -> stream worker ->
warehouse -> catalog -> batches -> report -> trainer -> gate -> checkpoints -> serving. Every
simulated interaction must come out as exactly one reward record in the warehouse's `rewards`
mart (nothing lost on any hop), and a training round must register a checkpoint trained on the
served one's batch."""

from __future__ import annotations

import subprocess
import sys

import duckdb
import pytest

from checkpoints.store import CheckpointRegistry
from rtrl.report.summary import SEED_METRICS, read_summary
from rtrl.worlds.editor_sim import editor_events
from tests.rtrl.browser import page_facts, rendered_dom
from tests.support.kafka import free_port_block
from tests.support.rtrl_run import run_rtrl

pytestmark = pytest.mark.slow


def test_rtrl_run_lands_every_interaction_once(tmp_path):
    interactions, seed = 200, 3
    kafka_port, http_port = free_port_block(2), free_port_block(2)  # collector, gateway
    done = run_rtrl(
        ["--world", "tokens", "--port", str(kafka_port), "--collector-port", str(http_port),
         "--interactions", str(interactions), "--seed", str(seed), "--window-s", "6",
         "--rounds", "1", "--round-users", "150", "--truth-samples", "128", "--ab-users", "20",
         "--gateway-port", str(http_port + 1)],
        tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "mean reward" in done.stdout  # the A/B report was printed
    assert "monitors:" in done.stdout
    assert "exp-context-window" in (tmp_path / "ab.svg").read_text()  # the forest plot

    assert "training rounds" in done.stdout
    assert "gate decisions against the truth" in done.stdout
    assert "cycle time (s, wall)" in done.stdout  # the stages of the one full cycle

    # the report page renders in a real browser, with every plot the run drew, loaded
    dom = rendered_dom(tmp_path / "report.html", tmp_path / "chromium-profile")
    page = page_facts(dom)
    assert page.body.get("data-ready") == "true"
    registry = CheckpointRegistry(tmp_path / "checkpoints")
    first, trained = registry.list()
    promoted = trained.status == "promoted"
    # with a promoted checkpoint the run ends with an A/B test of it against the first
    ab_plot = "final_ab.svg" if promoted else "ab.svg"
    assert page.plots == {"rounds.svg": "true", ab_plot: "true", "checkpoints.svg": "true"}
    # rounds, one A/B table per treatment arm, cycle times, lineage
    assert len(page.tables) >= 4 and "tiny-0000" in page.tables[0]
    assert "mean reward" in page.tables[1] and " % " in page.tables[1]
    assert "tiny-0000" in page.tables[-1] and "root" in page.tables[-1]

    expected = {e["interaction_id"] for e in editor_events(interactions, seed)}
    with duckdb.connect(str(tmp_path / "warehouse" / "warehouse.duckdb"), read_only=True) as con:
        rows = con.execute("select interaction_id, checkpoint_id from rewards").fetchall()
        batches = con.execute("select count(*) from batches").fetchall()[0][0]
        served = con.execute("select interaction_id, checkpoint_id from stg_rollouts").fetchall()
        final_ab = con.execute(
            "select experiment_arm, checkpoint_id, count(*) from rewards "
            "where experiment_name = 'final-ab' group by all order by 1"
        ).fetchall()
    ids = [r[0] for r in rows]
    assert len(ids) == len(set(ids)), "an interaction has more than one row in the mart"
    # the editor's interactions, one per user served in the two rounds and two per user of the
    # closing A/B test, each with its rollout
    ab_interactions = 40 if promoted else 0
    assert len(served) == len({i for i, _ in served}) == 300 + ab_interactions
    if promoted:
        assert [(arm, ckpt) for arm, ckpt, _ in final_ab] == [
            ("control", "tiny-0000"),
            ("treatment", trained.checkpoint_id),
        ]
        assert sum(n for *_, n in final_ab) == ab_interactions
        assert "experiment final-ab" in done.stdout
    else:
        assert final_ab == []
    assert set(ids) == expected | {i for i, _ in served}
    summary = read_summary(tmp_path / "summary.json")
    assert [c.checkpoint_id for c in summary.checkpoints] == ["tiny-0000", trained.checkpoint_id]
    assert summary.checkpoints[1].status == trained.status and summary.checkpoints[1].reasons
    assert len(summary.rounds) == 2 and len(summary.cycles) == 1
    (cycle,) = summary.cycles  # the share of the loop spent waiting on reward windows
    assert summary.settle_share == pytest.approx(cycle.stages["settle"] / cycle.total_s)
    assert "waiting on reward windows (settle)" in done.stdout
    # the whole run's wall time, and the closing A/B's (a server per arm: the transformers
    # engine's one gateway), within it
    loop_s = float(done.stderr.split("loop done in ")[1].split("s;")[0])
    assert summary.loop_s is not None and loop_s - 10 <= summary.loop_s <= loop_s + 1
    if promoted:
        assert summary.closing_ab_s is not None and set(summary.closing_ab_s) == {"server per arm"}
        assert 0 < summary.closing_ab_s["server per arm"] < summary.loop_s
    else:
        assert summary.closing_ab_s is None
    (ab,) = summary.ab
    assert (ab.experiment, ab.closing) == (("final-ab", True) if promoted
                                           else ("exp-context-window", False))  # fmt: skip
    if promoted:  # the seed's three metrics, each with a value and an interval in both arms
        for name in SEED_METRICS:
            m = ab.metric(name)
            assert m is not None and None not in (m.control, m.treatment, m.ci_low, m.ci_high)
    assert dict(served) == {i: c for i, c in rows if i in dict(served)}
    assert batches >= 1

    assert (first.checkpoint_id, trained.parent) == ("tiny-0000", "tiny-0000")
    assert trained.batches and trained.evals["n_train"] > 50
    second_round = {c for _, c in served} - {"tiny-0000"}
    assert second_round == ({trained.checkpoint_id} if trained.status == "promoted" else set())
    # the broker the run started is stopped again
    status = subprocess.run(
        [
            sys.executable,
            "-m",
            "rtrl.cli",
            "broker",
            "status",
            "--data-dir",
            str(tmp_path / "kafka"),
        ],
        capture_output=True,
    )
    assert status.returncode == 1
