"""A round per organisation: an organisation's line trains and is judged on its own users only,
the shared line leaves out an own-only organisation, and a candidate lands on its line. Two
organisations send the same interaction and user ids with opposite rewards: a round that mixed
them would train (and judge) on both."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import polars as pl
import pytest

from checkpoints.store import CheckpointRegistry
from checkpoints.weights import load_policy
from models.examples import Example
from release.gate import GateConfig
from tests.support.checkpoints import serve
from tests.support.rounds import round_options
from trainer.learner import LearnerConfig
from trainer.round_examples import read_round
from trainer.train import train_round
from warehouse.manifest import BATCH_DATA_SCHEMA

N = 64  # interactions of each organisation, the same ids in both


def _batch(path: Path, by_org: dict[str, list[Example]]) -> Path:
    base = {name: None for name in BATCH_DATA_SCHEMA.names()}
    rows = [{**base, "batch_id": "b", "interaction_id": e.rollout.interaction_id,
             "checkpoint_id": e.rollout.checkpoint_id, "status": "scored", "reward": e.reward,
             "rollout_json": e.rollout.to_json().decode(), "org_id": org,
             "user_id": f"u{k % 16}", "session_id": f"s{k % 16}"}
            for org, examples in by_org.items() for k, e in enumerate(examples)]  # fmt: skip
    pl.DataFrame(rows, schema=BATCH_DATA_SCHEMA).write_parquet(path)
    return path


@pytest.fixture
def two_orgs(tmp_path: Path, registry: CheckpointRegistry) -> Path:
    root = registry.get("t-0000")
    served = serve(load_policy(registry, root), root, N, seed=3)
    flipped = [replace(e, reward=-(e.reward or 0.0)) for e in served]  # the other taste
    return _batch(tmp_path / "b.parquet", {"acme": served, "globex": flipped})


def test_a_line_reads_only_its_organisation_and_the_shared_one_leaves_out_own_only(
    registry: CheckpointRegistry, two_orgs: Path
) -> None:
    parent = registry.get("t-0000")
    acme = read_round(parent, [("b", [two_orgs])], 0.5, org_id="acme")
    assert {e.org_id for e in acme.examples} == {"acme"} and len(acme.examples) == N
    assert acme.skipped["other_organisation"] == N
    shared = read_round(parent, [("b", [two_orgs])], 0.5, own_only=("globex",))
    assert {e.org_id for e in shared.examples} == {"acme"}
    assert shared.skipped["own_only_organisation"] == N
    both = read_round(parent, [("b", [two_orgs])], 0.5)
    assert len(both.examples) == 2 * N  # the same ids, two organisations: two records each


def test_an_organisations_round_is_judged_on_its_own_users_and_lands_on_its_line(
    registry: CheckpointRegistry, two_orgs: Path
) -> None:
    options = round_options(registry, LearnerConfig(lr=0.003, epochs=1, micro_batch=32),
                            GateConfig(eval_prompts=0, min_examples=8, min_users=4),
                            held_out=0.5, org="acme")  # fmt: skip
    result = train_round(registry, "t-0000", [("b", [two_orgs])], "acme-0001", options, [])
    assert result is not None
    info = result.candidate
    assert (info.org_id, info.shared_base, info.parent) == ("acme", "t-0000", "t-0000")
    assert result.n_train + result.n_held_out == N  # globex's N never trained or judged
    gate = info.evals["gate"]
    assert gate["users"] <= 16  # acme's users only (16 ids; globex's same ids are others)
    assert registry.get("acme-0001").org_id == "acme"


def test_each_line_spends_its_own_alpha_on_the_shared_parent(
    registry: CheckpointRegistry, two_orgs: Path
) -> None:
    """acme's and globex's first candidates from the shared checkpoint are each the first
    attempt of their own line (the gate's first level), and acme's next one is its second.
    Counted over the parent alone, globex's first was judged as the parent's second attempt: at
    a level spent by another organisation's decision on other users."""

    def options(org: str):
        return round_options(registry, LearnerConfig(lr=0.003, epochs=1, micro_batch=32),
                             GateConfig(eval_prompts=0, min_examples=8, min_users=4),
                             held_out=0.5, org=org)  # fmt: skip

    for candidate, org in (("acme-0001", "acme"), ("globex-0001", "globex"),
                           ("acme-0002", "acme")):  # fmt: skip
        train_round(registry, "t-0000", [("b", [two_orgs])], candidate, options(org), [])
    attempts = [registry.get(c).evals["gate"]["attempt"]
                for c in ("acme-0001", "globex-0001", "acme-0002")]  # fmt: skip
    assert attempts == [1, 1, 2]
