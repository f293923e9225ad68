"""A round of `rtrl run` whose held-out evidence is below the gate's minimums: `rtrl train`
waits (exit 4) and the run goes on with the same checkpoint, its batch carried over to the next
round, where before it stopped with an error. The real trainer on the real broker."""

from __future__ import annotations

from pathlib import Path

from ingest.sdk import SdkConfig
from rtrl.report.summary import WAITING
from rtrl.report.write import round_rows
from rtrl.run.rounds import TrainingRounds
from rtrl.worlds.token_world import RoundFigures
from tests.support.checkpoints import offer_batch
from tests.support.gateway import tiny_registry

FAST = ("--epochs", "1", "--minibatches", "2", "--micro-batch", "32", "--eval-prompts", "4")


def _rounds(root: Path, bootstrap: str, prefix: str, *train_args: str) -> TrainingRounds:
    sdk = SdkConfig(endpoint="http://127.0.0.1:9", api_key="k", org_id="acme")
    rounds = TrainingRounds(root=root, bootstrap=bootstrap, prefix=prefix, sdk=sdk,
                            interactions=40, seed=1, truth_samples=0,
                            train_args=(*FAST, *train_args))  # fmt: skip
    rounds.serving = "t-0000"
    return rounds


def test_a_round_short_of_held_out_evidence_waits_and_its_batch_carries_over(
        kafka_bootstrap, topic_names, tmp_path, tiny_model):  # fmt: skip
    root = tmp_path / "run"
    registry = tiny_registry(root / "checkpoints", tiny_model)
    warehouse = root / "warehouse"
    first = offer_batch(warehouse, kafka_bootstrap, topic_names.batches, registry, "t-0000", 40,
                        seed=1)  # fmt: skip
    rounds = _rounds(root, kafka_bootstrap, topic_names.prefix, "--gate-min-examples", "30",
                     "--held-out", "0.5")  # fmt: skip
    # one round's 40 interactions hold out about 20 runs: short of the 30 the gate needs
    assert rounds.train(warehouse) is None
    assert rounds.decisions == [None] and rounds.judged == []
    assert [i.checkpoint_id for i in registry.list()] == ["t-0000"]
    assert rounds.serving == "t-0000"
    assert "waiting to train t-0000" in (root / "logs" / "train.log").read_text()

    second = offer_batch(warehouse, kafka_bootstrap, topic_names.batches, registry, "t-0000", 40,
                         seed=2)  # fmt: skip
    decision = rounds.train(warehouse)  # both rounds' held-out runs: enough
    assert decision is not None and decision.parent == "t-0000"
    assert set(decision.batches) == {first, second}  # the first round's batch carried over
    assert rounds.decisions == [None, decision] and rounds.judged == [decision]
    assert decision.evals["gate"]["n"] >= 30

    # the run's report says the first round waited, the second was judged
    figures = [
        RoundFigures("t-0000", interactions=40, accepted=20, invalid_tool_calls=0, taste=0.5)
        for _ in range(3)
    ]
    rounds.figures.extend(figures)
    rows = round_rows(rounds, {})
    assert [r.gate_decision for r in rows] == [WAITING, decision.status, None]
    assert [r.candidate for r in rows] == [None, decision.checkpoint_id, None]
