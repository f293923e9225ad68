"""The checkpoint registry on a real filesystem: round trip, refusals, order, lineage, crashes."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest
import torch

from trainer.policy import PolicyConfig, new_policy, token_logprobs
from trainer.registry import CheckpointInfo, CheckpointRegistry

TINY = PolicyConfig(vocab_size=8, hidden=8, max_new_tokens=4)


def register(registry: CheckpointRegistry, checkpoint_id: str, parent: str | None = None,
             status: str = "promoted", seed: int = 0) -> CheckpointInfo:
    reasons = ("estimated reward gain -0.1 < 0.0",) if status == "rejected" else ()
    return registry.register(new_policy(TINY, seed), checkpoint_id=checkpoint_id, parent=parent,
                             evals={"gate": {"gain": 0.25, "kl": float("nan")}, "n": 3},
                             batches=("b1", "b2"), status=status, reasons=reasons)


def test_round_trip_gives_the_same_weights_and_logprobs(tmp_path: Path) -> None:
    registry = CheckpointRegistry(tmp_path / "reg")
    original = new_policy(TINY, seed=7)
    info = registry.register(original, checkpoint_id="c-1", parent=None, evals={"init_seed": 7},
                             batches=[], status="promoted")
    assert info.weights == str((tmp_path / "reg" / "c-1" / "weights.safetensors").resolve())
    assert os.path.isfile(info.weights) and info.policy == TINY.to_json_dict()
    assert registry.get("c-1") == info
    loaded = registry.load("c-1")
    assert loaded.config == TINY
    want, got = original.state_dict(), loaded.state_dict()
    assert want.keys() == got.keys()
    assert all(torch.equal(want[k], got[k]) for k in want)
    prompts, completions = torch.tensor([[1, 2, 3], [4, 5, 6]]), torch.tensor([[0, 7], [3, 3]])
    assert torch.equal(token_logprobs(original, prompts, completions),
                       token_logprobs(loaded, prompts, completions))
    # checkpoint.json on disk is the info's JSON form
    on_disk = orjson.loads((tmp_path / "reg" / "c-1" / "checkpoint.json").read_bytes())
    assert CheckpointInfo.from_json_dict(on_disk) == info


def test_eval_figures_are_stored_as_json(tmp_path: Path) -> None:
    info = register(CheckpointRegistry(tmp_path), "c1")
    assert info.evals == {"gate": {"gain": 0.25, "kl": None}, "n": 3}  # NaN has no JSON form
    with pytest.raises(ValueError, match=r"evals\.when: JSON values only"):
        CheckpointRegistry(tmp_path).register(new_policy(TINY, 0), checkpoint_id="c2",
                                              parent=None, evals={"when": object()},
                                              batches=(), status="promoted")


def test_refusals(tmp_path: Path) -> None:
    registry = CheckpointRegistry(tmp_path)
    register(registry, "c1")
    with pytest.raises(ValueError, match="registered already"):
        register(registry, "c1", seed=1)
    assert registry.load("c1").state_dict()["head.bias"].equal(
        new_policy(TINY, 0).state_dict()["head.bias"])  # the first weights stand
    with pytest.raises(ValueError, match="parent 'nope' of 'c2' is not registered"):
        register(registry, "c2", parent="nope")
    for bad in ("", "a/b", "..", ".hidden", "x" * 129, "sp ace"):
        with pytest.raises(ValueError, match="checkpoint_id: 1 to 128 characters"):
            register(registry, bad)
    with pytest.raises(ValueError, match="status: one of"):
        register(registry, "c3", status="maybe")
    with pytest.raises(KeyError, match="no checkpoint 'c9'"):
        registry.get("c9")
    assert [info.checkpoint_id for info in registry.list()] == ["c1"]
    assert [p.name for p in tmp_path.iterdir()] == ["c1"]  # no temp dir left by refusals


def test_tampered_weights_are_refused_before_loading(tmp_path: Path) -> None:
    registry = CheckpointRegistry(tmp_path)
    info = register(registry, "c1")
    data = bytearray(Path(info.weights).read_bytes())
    data[-1] ^= 0x01  # one bit of one weight
    Path(info.weights).write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"weights\.safetensors: sha256 .* differs"):
        registry.load("c1")


def test_current_skips_rejected_and_lineage_walks_to_the_root(tmp_path: Path) -> None:
    registry = CheckpointRegistry(tmp_path)
    assert registry.current() is None and registry.list() == []
    register(registry, "c1")
    register(registry, "c2", parent="c1")
    register(registry, "c3", parent="c2", status="rejected")
    assert [i.checkpoint_id for i in registry.list()] == ["c1", "c2", "c3"]
    current = registry.current()
    assert current is not None and current.checkpoint_id == "c2"
    assert registry.get("c3").reasons == ("estimated reward gain -0.1 < 0.0",)
    assert registry.lineage("c3") == ["c3", "c2", "c1"]
    assert registry.lineage("c1") == ["c1"]
    with pytest.raises(KeyError):
        registry.lineage("c4")


def test_a_crashed_register_leaves_nothing_that_counts(tmp_path: Path) -> None:
    registry = CheckpointRegistry(tmp_path)
    register(registry, "c1")
    # What a crash between writing and renaming leaves: a complete-looking temp dir.
    leftover = tmp_path / f".tmp-c2-{'0' * 32}"
    leftover.mkdir()
    (leftover / "checkpoint.json").write_bytes((tmp_path / "c1" / "checkpoint.json").read_bytes())
    other = tmp_path / f".tmp-c2-x-{'1' * 32}"  # another id's temp dir, which must survive
    other.mkdir()
    assert [i.checkpoint_id for i in registry.list()] == ["c1"]
    with pytest.raises(KeyError):
        registry.get("c2")
    register(registry, "c2", parent="c1")
    assert not leftover.exists() and other.exists()
    assert [i.checkpoint_id for i in registry.list()] == ["c1", "c2"]


def test_info_json_is_strict() -> None:
    good = CheckpointInfo("c1", None, "/r/c1/weights.safetensors", "a" * 64, TINY.to_json_dict(),
                          "2026-11-30T10:00:00Z", {}, (), "promoted", ()).to_json_dict()
    assert CheckpointInfo.from_json_dict(good).created_at == "2026-11-30T10:00:00.000000Z"
    cases = [
        ({k: v for k, v in good.items() if k != "sha256"}, r"missing fields \['sha256'\]"),
        ({**good, "status": "archived"}, "status: one of"),
        ({**good, "status": "rejected"}, "a rejected checkpoint says why"),
        ({**good, "reasons": ["x"]}, "a promoted checkpoint has none"),
        ({**good, "sha256": "A" * 64}, "sha256: 64 lower-case hex"),
        ({**good, "weights": "relative/w"}, "weights: an absolute path"),
        ({**good, "policy": {"vocab_size": 8}}, "every PolicyConfig field is required"),
        ({**good, "batches": "b1"}, "batches: a list"),
        ({**good, "created_at": "2026-11-30 10:00"}, "created_at"),
        ([good], "a JSON object"),
    ]
    for data, message in cases:
        with pytest.raises(ValueError, match=message):
            CheckpointInfo.from_json_dict(data)
