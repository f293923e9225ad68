"""`rtrl train` on the real broker: offered batches in, a gated checkpoint registered and
announced; a batch is trained on once; a monitor alarm blocks the promotion."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import duckdb
import polars as pl
import pytest
import torch

from checkpoints.publish import read_checkpoints
from checkpoints.store import CheckpointRegistry, next_id
from checkpoints.weights import load_policy
from release.gate import GateConfig
from rtrl.cli import main
from tests.support.checkpoints import offer_batch, register_variant, serve, write_batch
from tests.support.rounds import round_options
from trainer.exit_codes import EXIT_WAITING
from trainer.learner import LearnerConfig
from trainer.train import train_round
from warehouse.manifest import BATCH_DATA_SCHEMA

FAST = [
    "--lr",
    "0.003",
    "--epochs",
    "3",
    "--minibatches",
    "2",
    "--micro-batch",
    "32",
    "--eval-prompts",
    "4",
]


EVAL_METRICS = ["invalid_tool_call_rate", "edit_rate", "clarifying_rate", "subagent_rate",
                "task_pass_rate"]  # fmt: skip


def _train(tmp_path: Path, bootstrap: str, prefix: str, *extra: str) -> int:
    return main(
        [
            "train",
            "--registry",
            str(tmp_path / "ckpt"),
            "--warehouse",
            str(tmp_path / "wh"),
            "--bootstrap",
            bootstrap,
            "--topic-prefix",
            prefix,
            "--publish",
            "--device",
            "cpu",
            *FAST,
            *extra,
        ]
    )


def test_a_round_trains_on_its_batch_once_and_announces_the_decision(
        kafka_bootstrap, topic_names, tmp_path, registry, capsys):  # fmt: skip
    batch = offer_batch(
        tmp_path / "wh", kafka_bootstrap, topic_names.batches, registry, "t-0000", 400, seed=1
    )
    code = _train(tmp_path, kafka_bootstrap, topic_names.prefix)
    candidate = registry.get("t-0001")
    assert code == (0 if candidate.status == "promoted" else 3)
    assert candidate.parent == "t-0000" and candidate.batches == (batch,)
    assert candidate.evals["n_train"] + candidate.evals["n_held_out"] == 400
    # 30 % held out by a hash of the user; these records have none: each interaction alone
    assert 80 < candidate.evals["n_held_out"] < 160
    gate = candidate.evals["gate"]
    assert (candidate.status == "promoted") == (gate["lower"] > 0 and not candidate.reasons)
    assert gate["method"] == "centred-is-user-cr2-ik-t" and gate["lower"] < gate["gain"]
    assert gate["attempt"] == 1 and candidate.evals["evidence"]["rows"] == gate["n"]
    # low tokens are rewarded, but one round of 400 interactions is too few for the gate to be
    # sure of it, or even of the sign of its estimate: plain (clipped) importance weights on
    # rewards shifted by reward v1's whole range carry their own noise (the learner's tests
    # show the gain)
    assert gate["value"] >= -4.1 and gate["ess"] <= gate["n"]
    evals = [t["metric"] for t in candidate.evals["candidate_evals"]]
    if gate["lower"] <= 0:  # rejected by its bound: the evals could not save it, and never ran
        assert candidate.status == "rejected" and evals == []
    else:  # read from the generations' text by the agent harness; the tasks graded in a sandbox
        assert evals == EVAL_METRICS
    assert read_checkpoints(kafka_bootstrap, topic_names.checkpoints) == {
        "t-0000": registry.get("t-0000"),
        "t-0001": candidate,
    }  # the root was never announced
    # the decision re-runs from the evidence stored beside the candidate, to the same figures
    capsys.readouterr()
    assert main(["gate", "evaluate", "--checkpoint", "t-0001", "--registry",
                 str(tmp_path / "ckpt"), "--json"]) == code  # fmt: skip
    assert json.loads(capsys.readouterr().out)["reproduced"] is True
    # the batch is used: nothing left to train on
    assert _train(tmp_path, kafka_bootstrap, topic_names.prefix) == 1
    assert [i.checkpoint_id for i in registry.list()] == ["t-0000", "t-0001"]


def test_a_passing_candidate_with_canary_serves_first_and_lists_its_decision(
        kafka_bootstrap, topic_names, tmp_path, registry, capsys):  # fmt: skip
    offer_batch(
        tmp_path / "wh", kafka_bootstrap, topic_names.batches, registry, "t-0000", 200, seed=2
    )
    # a margin of -10 passes any finite bound: the canary is what is tested here
    code = _train(tmp_path, kafka_bootstrap, topic_names.prefix, "--canary", "20",
                  "--min-gain", "-10", "--canary-users", "50", "--canary-margin", "2",
                  "--canary-min-exposure-hours", "0")  # fmt: skip
    candidate = registry.get("t-0001")
    assert (code, candidate.status, registry.current().checkpoint_id) == (0, "canary", "t-0000")
    assert candidate.evals["canary"]["experiment"] == "canary-t-0001"
    assert candidate.evals["canary"]["config"]["min_users"] == 50
    assert read_checkpoints(kafka_bootstrap, topic_names.checkpoints)["t-0001"] == candidate
    # while the canary is live nothing else trains: its verdict says which checkpoint is next
    offer_batch(
        tmp_path / "wh", kafka_bootstrap, topic_names.batches, registry, "t-0000", 60, seed=4
    )
    assert _train(tmp_path, kafka_bootstrap, topic_names.prefix) == 1
    capsys.readouterr()
    assert main(["checkpoints", "list", "--registry", str(registry.root), "--json"]) == 0
    listed = {c["checkpoint_id"]: c["decision"] for c in json.loads(capsys.readouterr().out)}
    decision = listed["t-0001"]
    gate = candidate.evals["gate"]
    assert (decision["estimate"], decision["bound"], decision["ess"], decision["kl"]) == (
        gate["gain"], gate["lower"], gate["ess"], gate["kl"])  # fmt: skip
    assert decision["canary"] == {"experiment": "canary-t-0001", "percent": 20.0, "looks": 0,
                                  "outcome": None}  # fmt: skip
    assert decision["monitor_alarms"] == [] and decision["candidate_eval_alarms"] == []
    assert listed["t-0000"]["estimate"] is None and listed["t-0000"]["canary"] is None
    # its users' rewards land; `rtrl canary decide` takes a look, and `rtrl canary evaluate`
    # re-runs the course from the evidence that look stored, to the same decision
    _land_canary_rewards(tmp_path / "canary-wh", "canary-t-0001", users=300)
    assert main(["canary", "decide", "--registry", str(registry.root), "--catalog",
                 str(tmp_path / "canary-wh" / "warehouse.duckdb"), "--json"]) == 0  # fmt: skip
    (looked,) = json.loads(capsys.readouterr().out)
    assert (looked["look"], looked["verdict"]) == (1, "rollout")  # within a margin of 2
    code = main(["canary", "evaluate", "--registry", str(registry.root), "--checkpoint",
                 "t-0001", "--json"])  # fmt: skip
    rerun = json.loads(capsys.readouterr().out)
    assert (code, rerun["decision"], rerun["looks"], rerun["reproduced"]) == (0, "rollout", 1, True)
    assert registry.get("t-0001").status == "promoted"


def _land_canary_rewards(root: Path, experiment: str, users: int) -> None:
    """One scored reward record per user of ``experiment``, 20 % on the canary."""
    from tests.support.warehouse import land
    from tests.warehouse.support import fixture_records
    from warehouse.catalog import build_catalog
    from warehouse.store import Store

    template = next(r for r in fixture_records() if r["interaction_id"] == "N1")
    records = [dict(template, interaction_id=f"c-{k}", user_id=f"cu{k}", reward=0.5 + (k % 7) / 10,
                    experiment_name=experiment, experiment_arm="canary" if k % 5 == 0 else "parent")
               for k in range(users)]  # fmt: skip
    store = Store(str(root))
    land(store, "rewards", records)
    build_catalog(store)


def test_only_the_served_checkpoints_batches_are_read(kafka_bootstrap, topic_names, tmp_path,
                                                      registry):  # fmt: skip
    register_variant(registry, "u-0000", None, seed=1)
    offer_batch(
        tmp_path / "wh", kafka_bootstrap, topic_names.batches, registry, "t-0000", 60, seed=3
    )
    assert _train(tmp_path, kafka_bootstrap, topic_names.prefix, "--checkpoint", "u-0000") == 1
    assert [i.checkpoint_id for i in registry.list()] == ["t-0000", "u-0000"]


def test_a_monitor_alarm_rejects_the_candidate(kafka_bootstrap, topic_names, tmp_path,
                                               registry):  # fmt: skip
    # t-0001 is served after t-0000 and calls tools badly twice as often
    register_variant(registry, "t-0001", "t-0000", seed=1)
    offer_batch(
        tmp_path / "wh", kafka_bootstrap, topic_names.batches, registry, "t-0001", 300, seed=4
    )
    catalog = tmp_path / "catalog.duckdb"
    records = pl.DataFrame(
        {
            "interaction_id": [f"x{i}" for i in range(800)],
            "revision": [0] * 800,
            "checkpoint_id": ["t-0000"] * 400 + ["t-0001"] * 400,
            "status": ["scored"] * 800,
            "n_edits": [1] * 800,
            "n_clarifying": [0] * 800,
            "n_tool_calls": [1] * 800,
            "n_invalid_tool_calls": [1 if i < 40 or 400 <= i < 480 else 0 for i in range(800)],
            "n_subagents": [0] * 800,
            "n_subagents_unused": [0] * 800,
        }
    )
    with duckdb.connect(str(catalog)) as con:
        con.register("records", records)
        con.execute("CREATE TABLE rewards AS SELECT * FROM records")
    code = _train(
        tmp_path,
        kafka_bootstrap,
        topic_names.prefix,
        "--catalog",
        str(catalog),
        "--min-gain",
        "-100",
    )
    candidate = registry.get("t-0002")
    assert code == 3 and candidate.status == "rejected"
    assert any("invalid" in r and r.startswith("monitor alarm") for r in candidate.reasons)
    assert read_checkpoints(kafka_bootstrap, topic_names.checkpoints)["t-0002"].status == "rejected"


def test_next_ids_never_reuse_a_number(registry):
    assert next_id(registry, registry.get("t-0000")) == "t-0001"
    register_variant(registry, "t-0007", "t-0000", seed=1, status="rejected", reasons=("x",))
    assert next_id(registry, registry.get("t-0000")) == "t-0008"


def test_init_then_list_with_the_reward_plot(tmp_path, capsys, tiny_model):
    registry = tmp_path / "reg"
    init = ["checkpoints", "init", "--registry", str(registry), "--id", "m-0000", "--model"]
    assert main([*init, str(tiny_model)]) == 0
    info = CheckpointRegistry(registry).get("m-0000")
    assert info.status == "promoted" and info.parent is None
    assert (info.weights.kind, info.model.family) == ("base", "llama")
    assert main([*init, str(tiny_model)]) == 2  # taken
    assert main([*init[:-3], "--id", "m-0009", "--model", str(tmp_path / "none")]) == 2
    capsys.readouterr()
    assert main(["checkpoints", "list", "--registry", str(registry), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [c["checkpoint_id"] for c in listed] == ["m-0000"]
    assert listed[0]["model"]["base_sha256"] == info.model.base_sha256
    catalog = tmp_path / "catalog.duckdb"
    with duckdb.connect(str(catalog)) as con:
        con.execute(
            "CREATE TABLE rewards AS SELECT 'm-0000' AS checkpoint_id, "
            "'scored' AS status, 0.25 AS reward"
        )
    assert (
        main(
            ["checkpoints", "list", "--registry", str(registry), "--plot", str(tmp_path / "p.svg")]
        )
        == 2
    )  # the plot needs the mart
    capsys.readouterr()
    assert (
        main(
            [
                "checkpoints",
                "list",
                "--registry",
                str(registry),
                "--catalog",
                str(catalog),
                "--plot",
                str(tmp_path / "p.svg"),
            ]
        )
        == 0
    )
    assert "m-0000" in capsys.readouterr().out
    assert "m-0000" in (tmp_path / "p.svg").read_text()


def test_a_checkpoint_registered_but_never_announced_is_announced_by_the_next_run(
        kafka_bootstrap, topic_names, tmp_path, registry):  # fmt: skip
    """The state a trainer killed between registering and announcing leaves behind."""
    register_variant(registry, "t-0001", "t-0000", seed=1, batches=("b-lost",))
    assert read_checkpoints(kafka_bootstrap, topic_names.checkpoints) == {}
    assert _train(tmp_path, kafka_bootstrap, topic_names.prefix) == 1  # nothing to train on...
    held = read_checkpoints(kafka_bootstrap, topic_names.checkpoints)
    assert held == {"t-0000": registry.get("t-0000"), "t-0001": registry.get("t-0001")}  # ...yet
    assert (
        main(
            [
                "checkpoints",
                "announce",
                "--registry",
                str(tmp_path / "ckpt"),
                "--bootstrap",
                kafka_bootstrap,
                "--topic-prefix",
                topic_names.prefix,
            ]
        )
        == 0
    )  # idempotent
    assert read_checkpoints(kafka_bootstrap, topic_names.checkpoints) == held


def test_rtrl_train_killed_after_registering_loses_no_announcement(
        kafka_bootstrap, topic_names, tmp_path, registry):  # fmt: skip
    """SIGKILL the trainer as soon as its candidate's folder is in place: the next run announces
    it, and trains on nothing twice."""
    offer_batch(
        tmp_path / "wh", kafka_bootstrap, topic_names.batches, registry, "t-0000", 200, seed=5
    )
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rtrl.cli",
            "train",
            "--registry",
            str(tmp_path / "ckpt"),
            "--warehouse",
            str(tmp_path / "wh"),
            "--bootstrap",
            kafka_bootstrap,
            "--topic-prefix",
            topic_names.prefix,
            "--publish",
            "--device",
            "cpu",
            *FAST,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    info_file = tmp_path / "ckpt" / "t-0001" / "checkpoint.json"
    deadline = time.monotonic() + 120
    while not info_file.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    proc.kill()
    proc.wait(30)
    assert info_file.exists(), "the trainer never registered its candidate"
    # killed before it announced (announcing first reads the topic: tens of milliseconds)
    assert "t-0001" not in read_checkpoints(kafka_bootstrap, topic_names.checkpoints)
    assert _train(tmp_path, kafka_bootstrap, topic_names.prefix) == 1  # its batch is used
    held = read_checkpoints(kafka_bootstrap, topic_names.checkpoints)
    assert held["t-0001"] == registry.get("t-0001")
    assert [i.checkpoint_id for i in registry.list()] == ["t-0000", "t-0001"]


def test_rollback_serves_old_weights_under_a_new_id(kafka_bootstrap, topic_names, tmp_path,
                                                    registry):  # fmt: skip
    register_variant(registry, "t-0001", "t-0000", seed=1, batches=("b",))
    args = [
        "checkpoints",
        "rollback",
        "--registry",
        str(tmp_path / "ckpt"),
        "--bootstrap",
        kafka_bootstrap,
        "--topic-prefix",
        topic_names.prefix,
    ]
    assert main([*args, "--to", "t-0000"]) == 0
    back = registry.current()
    assert back is not None and back.checkpoint_id == "t-0002" and back.parent == "t-0000"
    old = load_policy(registry, registry.get("t-0000")).model.state_dict()
    new = load_policy(registry, back).model.state_dict()
    assert all(torch.equal(old[k], new[k]) for k in old)
    assert read_checkpoints(kafka_bootstrap, topic_names.checkpoints)["t-0002"] == back
    assert main([*args, "--to", "t-0009"]) == 2  # unknown
    assert main([*args, "--to", "t-0000", "--id", "t-0001"]) == 2  # taken


def _empty_catalog(path: Path) -> Path:
    with duckdb.connect(str(path)) as con:
        con.execute(
            "CREATE TABLE rewards (interaction_id VARCHAR, revision BIGINT, "
            "checkpoint_id VARCHAR, status VARCHAR, n_edits BIGINT, n_clarifying BIGINT, "
            "n_tool_calls BIGINT, n_invalid_tool_calls BIGINT, n_subagents BIGINT, "
            "n_subagents_unused BIGINT)"
        )
    return path


def _wait_for(path: Path, proc: subprocess.Popen, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, "the service exited"
        assert time.monotonic() < deadline, f"{path} did not appear"
        time.sleep(0.1)


def test_the_service_trains_each_new_checkpoint_on_its_batches_until_sigterm(
        kafka_bootstrap, topic_names, tmp_path, registry):  # fmt: skip
    catalog = _empty_catalog(tmp_path / "catalog.duckdb")
    log = tmp_path / "service.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "rtrl.cli",
                "train",
                "--watch",
                "--interval-s",
                "0.5",
                "--registry",
                str(tmp_path / "ckpt"),
                "--warehouse",
                str(tmp_path / "wh"),
                "--catalog",
                str(catalog),
                "--min-gain",
                "-100",
                "--max-kl",
                "100",
                "--bootstrap",
                kafka_bootstrap,
                "--topic-prefix",
                topic_names.prefix,
                "--publish",
                "--device",
                "cpu",
                *FAST,
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 60  # idle first: it looked and found nothing to train on
        while "no new offered batch of t-0000" not in log.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-2000:]
            time.sleep(0.1)
        assert [i.checkpoint_id for i in registry.list()] == ["t-0000"]
        for served, trained in (("t-0000", "t-0001"), ("t-0001", "t-0002")):
            offer_batch(
                tmp_path / "wh",
                kafka_bootstrap,
                topic_names.batches,
                registry,
                served,
                300,
                seed=int(trained[-1]),
            )
            _wait_for(tmp_path / "ckpt" / trained / "checkpoint.json", proc)
            assert registry.get(trained).parent == served
        deadline = time.monotonic() + 30
        while "t-0002" not in read_checkpoints(kafka_bootstrap, topic_names.checkpoints):
            assert time.monotonic() < deadline, "t-0002 was not announced"
            time.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(30)
    assert code == 0, log.read_text()[-2000:]
    said = log.read_text()
    assert "stopped after 2 round(s)" in said
    assert said.count("no new offered batch of t-0000") == 1  # idle is said once, not per look
    assert [i.status for i in registry.list()] == ["promoted"] * 3


def test_the_service_refuses_a_fixed_checkpoint(tmp_path):
    assert (
        main(["train", "--watch", "--checkpoint", "t-0000", "--registry", str(tmp_path / "r")]) == 2
    )


def test_a_round_refuses_another_checkpoints_batch_and_a_batch_without_rollouts(
        tmp_path, registry):  # fmt: skip
    base = {name: None for name in BATCH_DATA_SCHEMA.names()}
    rows = [
        {
            **base,
            "batch_id": "b",
            "interaction_id": f"i{i}",
            "checkpoint_id": "x-0000",
            "status": "scored",
            "reward": 0.5,
        }
        for i in range(3)
    ]
    other = tmp_path / "other.parquet"
    pl.DataFrame(rows, schema=BATCH_DATA_SCHEMA).write_parquet(other)
    options = dict(options=round_options(registry, LearnerConfig(), GateConfig()), alarms=[])
    with pytest.raises(ValueError, match="on-policy"):
        train_round(registry, "t-0000", [("b", [other])], "t-0001", **options)
    mine = tmp_path / "mine.parquet"
    pl.DataFrame(
        [{**r, "checkpoint_id": "t-0000"} for r in rows], schema=BATCH_DATA_SCHEMA
    ).write_parquet(mine)
    with pytest.raises(ValueError, match="no examples"):
        train_round(registry, "t-0000", [("b", [mine])], "t-0001", **options)
    assert [i.checkpoint_id for i in registry.list()] == ["t-0000"]  # nothing registered


def test_a_rejected_rounds_batch_stays_available_to_its_parent(registry, tmp_path):
    from trainer.inputs import OfferedBatch, untrained

    offered = [OfferedBatch("b1", "t-0000", ("f1",))]
    assert [b for b, _ in untrained(offered, registry, "t-0000", tmp_path)] == ["b1"]
    register_variant(
        registry,
        "t-0001",
        "t-0000",
        seed=1,
        status="rejected",
        reasons=("no gain",),
        batches=("b1",),
    )
    # tried and rejected, nothing new: another round would only repeat the rejection
    assert untrained(offered, registry, "t-0000", tmp_path) == []
    # a new batch arrives: the rejected one is still on-policy for t-0000 and trains with it
    offered.append(OfferedBatch("b2", "t-0000", ("f2",)))
    assert [b for b, _ in untrained(offered, registry, "t-0000", tmp_path)] == ["b1", "b2"]
    register_variant(registry, "t-0002", "t-0000", seed=2, batches=("b1", "b2"))
    assert untrained(offered, registry, "t-0000", tmp_path) == []  # a promoted one used both


def test_sigterm_stops_a_round_within_seconds_and_the_next_start_resumes_it(
        kafka_bootstrap, topic_names, tmp_path, registry):  # fmt: skip
    """A long update (32 steps of many micro-batches) is stopped between two micro-batches, its
    state saved at the last step taken; the next start of the same round resumes there."""
    catalog = _empty_catalog(tmp_path / "catalog.duckdb")
    offer_batch(tmp_path / "wh", kafka_bootstrap, topic_names.batches, registry, "t-0000", 300,
                 seed=1)  # fmt: skip
    command = [sys.executable, "-m", "rtrl.cli", "train", "--registry", str(tmp_path / "ckpt"),
               "--warehouse", str(tmp_path / "wh"), "--catalog", str(catalog),
               "--bootstrap", kafka_bootstrap, "--topic-prefix", topic_names.prefix,
               "--device", "cpu", "--eval-prompts", "0", "--min-gain", "-100", "--max-kl", "100",
               "--lr", "0.0001", "--target-kl", "100", "--epochs", "8", "--minibatches", "4",
               "--micro-batch", "4", "--save-every", "1000"]  # fmt: skip
    log = tmp_path / "service.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([*command, "--watch", "--interval-s", "0.5"], stdout=out,
                                stderr=subprocess.STDOUT)  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while "epoch 1 minibatch 2:" not in log.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-2000:]
            time.sleep(0.02)
    finally:
        asked = datetime.now()  # the log's clock: local time, to the millisecond
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(60)
    said = log.read_text()
    assert code == 0, said[-2000:]
    stopped = re.search(r"(\S+ \S+) INFO rtrl.train: round t-0001 stopped during its update, "
                        r"after step (\d+): its update's state is saved", said)  # fmt: skip
    assert stopped is not None, said[-2000:]
    # said within seconds (process exit after it is not timed: under a loaded, niced test run
    # an interpreter's teardown alone has taken 10 s)
    took = (datetime.strptime(stopped[1], "%Y-%m-%d %H:%M:%S,%f") - asked).total_seconds()
    assert took < 5, (took, said[-2000:])
    step = stopped[2]
    assert 2 <= int(step) < 32  # in the middle, where --save-every alone saves nothing
    assert [i.checkpoint_id for i in registry.list()] == ["t-0000"]

    resumed = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert resumed.returncode in (0, 3), resumed.stderr[-2000:]
    assert f"resuming round t-0001 from its saved state at step {step}" in resumed.stderr
    assert registry.get("t-0001").training.step == 32


def test_a_round_waits_for_the_gates_evidence_and_spends_no_attempt(
        kafka_bootstrap, topic_names, tmp_path, registry, caplog):  # fmt: skip
    """A batch too small for the gate's minimum held-out evidence starts no round: nothing is
    registered, no attempt reserved, and the log says what it waits for; once more data
    arrives the round runs."""
    offer_batch(tmp_path / "wh", kafka_bootstrap, topic_names.batches, registry, "t-0000", 40,
                 seed=1)  # fmt: skip
    caplog.set_level("INFO", logger="rtrl.train")
    assert _train(tmp_path, kafka_bootstrap, topic_names.prefix, "--gate-min-examples", "40",
                  "--held-out", "0.3") == EXIT_WAITING  # fmt: skip
    assert "waiting to train t-0000 for the shared line on 1 batch(es)" in caplog.text
    assert "of the 40 the gate needs" in caplog.text
    assert [i.checkpoint_id for i in registry.list()] == ["t-0000"]
    assert not (registry.root / ".attempts").exists() or not any(
        (registry.root / ".attempts").iterdir()
    )
    offer_batch(tmp_path / "wh", kafka_bootstrap, topic_names.batches, registry, "t-0000", 300,
                 seed=2)  # fmt: skip
    assert _train(tmp_path, kafka_bootstrap, topic_names.prefix, "--gate-min-examples", "40",
                  "--held-out", "0.3") in (0, 3)  # fmt: skip
    info = registry.get("t-0001")
    assert info.evals["gate"]["n"] >= 40 and info.evals["gate"]["attempt"] == 1


def test_a_doomed_candidate_is_rejected_before_its_evals(registry, tmp_path):
    """The gate's cheap checks come first: a candidate its bound rejects is not sampled for the
    candidate evals (minutes on a CPU), which could not change the decision; one that passes
    them is."""
    root = registry.get("t-0000")
    examples = serve(load_policy(registry, root), root, 200, seed=4)
    batch = [("b", [write_batch(tmp_path / "b.parquet", examples, "b")])]
    learner = LearnerConfig(lr=0.003, epochs=1, micro_batch=32)
    for candidate, min_gain, evals in (("t-0001", 100.0, []), ("t-0002", -100.0, EVAL_METRICS)):
        gate = GateConfig(min_gain=min_gain, max_kl=100, eval_prompts=2, eval_samples=1)
        options = round_options(registry, learner, gate, held_out=0.3)
        result = train_round(registry, "t-0000", batch, candidate, options, [])
        assert result is not None
        assert [t["metric"] for t in result.candidate.evals["candidate_evals"]] == evals
        assert (result.candidate.status == "promoted") == (min_gain < 0)


def _scrape(port: int) -> dict[str, float]:
    import httpx

    try:
        text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    except httpx.HTTPError:
        return {}
    return {k: float(v) for k, v in (line.rsplit(" ", 1) for line in text.splitlines()
                                     if line and not line.startswith("#"))}  # fmt: skip


def test_the_service_shows_what_it_waits_for_and_how_its_rounds_ended(
        kafka_bootstrap, topic_names, tmp_path, registry):  # fmt: skip
    from infra.ports import free_port_block

    catalog = _empty_catalog(tmp_path / "catalog.duckdb")
    port, log = free_port_block(1), tmp_path / "service.log"
    offer_batch(tmp_path / "wh", kafka_bootstrap, topic_names.batches, registry, "t-0000", 40,
                 seed=1)  # fmt: skip
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "rtrl.cli", "train", "--watch", "--interval-s", "0.5",
             "--metrics-port", str(port), "--registry", str(tmp_path / "ckpt"),
             "--warehouse", str(tmp_path / "wh"), "--catalog", str(catalog),
             "--bootstrap", kafka_bootstrap, "--topic-prefix", topic_names.prefix,
             "--device", "cpu", "--min-gain", "-100", "--max-kl", "100",
             "--gate-min-examples", "40", *FAST],
            stdout=out, stderr=subprocess.STDOUT)  # fmt: skip

    def until(name: str, value: float) -> dict[str, float]:
        deadline = time.monotonic() + 120
        while (got := _scrape(port)).get(name) != value:
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-2000:]
            time.sleep(0.2)
        return got

    try:
        waiting = until('rtrl_trainer_phase{rtrl_trainer_phase="waiting"}', 1.0)
        have = waiting['rtrl_trainer_evidence{of="have",what="runs"}']
        assert 0 < have < waiting['rtrl_trainer_evidence{of="need",what="runs"}'] == 40
        offer_batch(tmp_path / "wh", kafka_bootstrap, topic_names.batches, registry, "t-0000",
                     300, seed=2)  # fmt: skip
        done = until('rtrl_trainer_rounds_total{outcome="promoted"}', 1.0)
        assert done['rtrl_trainer_rounds_total{outcome="rejected"}'] == 0
        assert done["rtrl_trainer_last_round_seconds"] > 0
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(60)
    assert code == 0, log.read_text()[-2000:]
