"""A line's earlier rounds as evidence: acme's first candidate is promoted on the shared
checkpoint's batch, serves a batch of its own, and its candidate is judged on both batches'
held-out users, the earlier batch's scored by the parent (acme-0001) before the update. The
evidence file keeps those scores, so that `rtrl gate evaluate` re-runs the decision as made."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
import torch

from checkpoints.store import CheckpointRegistry
from checkpoints.weights import load_policy
from models.examples import read_examples
from models.sampling import SamplingParams
from models.scoring import score_examples
from release.evidence import read_evidence
from release.gate import GateConfig
from rtrl.cli import main
from tests.support.checkpoints import PARAMS, serve, write_batch
from tests.support.rounds import round_options
from trainer.inputs import OfferedBatch, earlier_batches
from trainer.learner import LearnerConfig
from trainer.round_examples import held_out, unit_of
from trainer.train import train_round

HELD_OUT = 0.5


def _acme_batch(path: Path, registry: CheckpointRegistry, checkpoint_id: str, seed: int,
                params: SamplingParams = PARAMS) -> Path:  # fmt: skip
    """96 interactions served by ``checkpoint_id`` to acme's 16 users."""
    info = registry.get(checkpoint_id)
    batch = write_batch(path, serve(load_policy(registry, info), info, 96, seed, params))
    frame = pl.read_parquet(batch)
    users = pl.Series("user_id", [f"u{k % 16}" for k in range(frame.height)])
    frame.with_columns(users, pl.lit("acme").alias("org_id")).write_parquet(batch)
    return batch


def test_a_candidate_is_judged_on_its_grandparents_held_out_users_with_the_parents_scores(
    registry: CheckpointRegistry, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    learner = LearnerConfig(lr=5e-3, epochs=1, minibatches=2, micro_batch=32)
    options = round_options(registry, learner,
                            GateConfig(min_gain=-100, max_kl=100, min_examples=8, min_users=2,
                                       eval_prompts=0),
                            held_out=HELD_OUT, org="acme")  # fmt: skip
    b0 = _acme_batch(tmp_path / "b0.parquet", registry, "t-0000", seed=0)
    first = train_round(registry, "t-0000", [("b0", [b0])], "acme-0001", options, [])
    assert first is not None
    assert first.candidate.status == "promoted", first.candidate.reasons
    b1 = _acme_batch(tmp_path / "b1.parquet", registry, "acme-0001", seed=1)

    offered = [OfferedBatch("b0", "t-0000", ("b0.parquet",)),
               OfferedBatch("b1", "acme-0001", ("b1.parquet",))]  # fmt: skip
    assert earlier_batches(offered, registry, "acme-0001", 0, tmp_path) == []
    earlier = earlier_batches(offered, registry, "acme-0001", 1, tmp_path)
    assert earlier == [("b0", "t-0000", [b0])]

    second = train_round(registry, "acme-0001", [("b1", [b1])], "acme-0002", options, [],
                         earlier=earlier)  # fmt: skip
    assert second is not None
    info = second.candidate
    rows = read_evidence(info.file(info.evals["evidence"]["file"]))
    old = [e for e in read_examples(b0).examples if held_out(unit_of(e), HELD_OUT)]
    from_old = [r for r in rows if r.parent_logprobs is not None]
    assert 0 < len(from_old) == len(old) == info.evals["evidence"]["earlier_rows"]
    assert len(rows) - len(from_old) == second.n_held_out  # the parent's own held-out users
    assert info.evals["skipped_earlier"]["trained_side"] == 96 - len(old)
    # the parent's scores, not the behaviour's: acme-0001 scoring round 1's tokens
    parent = load_policy(registry, registry.get("acme-0001"))
    expected = {e.rollout.interaction_id: s for e, s in zip(old, score_examples(parent, old),
                                                              strict=True)}  # fmt: skip
    for row in from_old:
        assert row.parent_logprobs is not None
        scored = torch.tensor(row.parent_logprobs, dtype=torch.float64)
        assert torch.allclose(scored, expected[row.interaction_id].double(), atol=1e-5)
        assert not torch.allclose(scored, torch.tensor(row.behaviour_logprobs, dtype=torch.float64),
                                  atol=1e-3)  # fmt: skip
    assert main(["gate", "evaluate", "--json", "--checkpoint", "acme-0002", "--registry",
                 str(registry.root)]) in (0, 3)  # fmt: skip
    out = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert out["reproduced"] is True and out["n"] == len(rows)


def test_earlier_rows_are_left_out_where_the_parents_own_rows_had_a_nucleus(
    registry: CheckpointRegistry, tmp_path: Path
) -> None:
    """The both-arms estimate is the centred one; a parent served with top-p < 1 is judged by the
    clipped bound on its own rows alone, and the round goes on (it raised before)."""
    learner = LearnerConfig(lr=5e-3, epochs=1, minibatches=2, micro_batch=32)
    gate = GateConfig(min_gain=-100, max_kl=100, min_examples=8, min_users=2, eval_prompts=0)
    options = round_options(registry, learner, gate, held_out=HELD_OUT, org="acme")
    b0 = _acme_batch(tmp_path / "b0.parquet", registry, "t-0000", seed=0)
    assert train_round(registry, "t-0000", [("b0", [b0])], "acme-0001", options, [])
    nucleus = SamplingParams(max_tokens=6, top_p=0.9)
    b1 = _acme_batch(tmp_path / "b1.parquet", registry, "acme-0001", seed=1, params=nucleus)
    result = train_round(registry, "acme-0001", [("b1", [b1])], "acme-0002", options, [],
                         earlier=[("b0", "t-0000", [b0])])  # fmt: skip
    assert result is not None
    evidence = result.candidate.evals["evidence"]
    assert evidence["earlier_rows"] == 0 and evidence["rows"] == result.n_held_out
    assert result.candidate.evals["n_earlier_held_out"] > 0  # read, then left out
