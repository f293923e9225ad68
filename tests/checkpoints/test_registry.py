"""The checkpoint registry: checkpoints of every kind (base, full weights, LoRA adapter) load back
to the same policy, files are checked before use, a crashed register leaves nothing that counts,
and the stored form is strict."""

from __future__ import annotations

import pytest
import torch

from checkpoints.record import CheckpointInfo, TrainingRef
from checkpoints.weights import (
    copy_as,
    load_policy,
    load_trainer_state,
    weight_writers,
)
from models.loading import LoraSettings
from models.scoring import score_examples
from tests.support.checkpoints import register_variant, serve
from trainer.learner import LearnerConfig, update


@pytest.mark.parametrize("lora", [None, LoraSettings(r=4)])
def test_a_trained_checkpoint_loads_back_to_the_same_logprobs(registry, lora):
    root = registry.get("t-0000")
    policy = load_policy(registry, root, new_lora=lora)
    examples = serve(policy, root, 16, seed=0)
    result = update(policy, examples, LearnerConfig(lr=1e-2, epochs=1, minibatches=2))
    weights, files = weight_writers(policy, lora, result.optimizer_state)
    info = registry.register(
        checkpoint_id="t-0001",
        parent="t-0000",
        model=root.model,
        weights=weights,
        training=TrainingRef(step=2, file="trainer_state.pt"),
        files=files,
        evals={"x": 1.0},
        batches=("b",),
        status="promoted",
    )
    assert info.weights.kind == ("lora" if lora else "full")
    if lora:  # an adapter only: far smaller than the model
        assert info.file("adapter.safetensors").stat().st_size < 0.2 * tiny_model_size(root)
    again = load_policy(registry, registry.get("t-0001"))
    for a, b in zip(score_examples(policy, examples), score_examples(again, examples), strict=True):
        assert torch.allclose(a, b, atol=1e-6)
    state = load_trainer_state(registry, info)
    assert state is not None and state["optimizer"]["state"]


def tiny_model_size(info: CheckpointInfo) -> int:
    from pathlib import Path

    return (Path(info.model.base_path) / "model.safetensors").stat().st_size


def test_changed_files_are_refused_before_loading(registry):
    info = register_variant(registry, "t-0001", "t-0000", seed=1)
    weights = info.file("model.safetensors")
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="changed or damaged"):
        load_policy(registry, info)


def test_ids_are_never_reused_and_parents_must_exist(registry):
    register_variant(registry, "t-0001", "t-0000", seed=1)
    with pytest.raises(ValueError, match="registered already"):
        register_variant(registry, "t-0001", "t-0000", seed=2)
    with pytest.raises(ValueError, match="not registered"):
        register_variant(registry, "t-0002", "nope", seed=2)
    with pytest.raises(ValueError, match="checkpoint_id"):
        register_variant(registry, "../x", "t-0000", seed=2)


def test_current_skips_rejected_and_lineage_walks_to_the_root(registry):
    register_variant(registry, "t-0001", "t-0000", seed=1)
    register_variant(registry, "t-0002", "t-0001", seed=2, status="rejected", reasons=("no",))
    current = registry.current()
    assert current is not None and current.checkpoint_id == "t-0001"
    assert registry.lineage("t-0002") == ["t-0002", "t-0001", "t-0000"]
    assert registry.root_of("t-0002") == "t-0000"


def test_a_rollback_copies_the_weights_under_a_new_id(registry):
    old = register_variant(registry, "t-0001", "t-0000", seed=1)
    back = copy_as(registry, old, "t-0002", evals={"rollback_of": "t-0001"})
    assert back.weights.sha256 == old.weights.sha256 and back.parent == "t-0001"
    a, b = load_policy(registry, old), load_policy(registry, back)
    assert all(
        torch.equal(x, y) for x, y in zip(a.model.parameters(), b.model.parameters(), strict=True)
    )


def test_a_crashed_register_leaves_nothing_that_counts(registry):
    def crash(_path):
        raise OSError("disk full")

    root = registry.get("t-0000")
    with pytest.raises(OSError):
        registry.register(
            checkpoint_id="t-0001",
            parent="t-0000",
            model=root.model,
            weights=root.weights,
            training=TrainingRef(),
            files={"x.bin": crash},
            evals={},
            batches=(),
            status="promoted",
        )
    assert [i.checkpoint_id for i in registry.list()] == ["t-0000"]
    assert not any(p.name.startswith(".tmp-") for p in registry.root.iterdir())


def test_info_json_is_strict_and_an_old_registry_is_named(registry):
    info = registry.get("t-0000")
    data = info.to_json_dict()
    assert CheckpointInfo.from_json_dict(data) == info
    with pytest.raises(ValueError, match="unknown fields"):
        CheckpointInfo.from_json_dict({**data, "extra": 1})
    old = {k: v for k, v in data.items() if k != "model"} | {"policy": {"vocab_size": 32}}
    with pytest.raises(ValueError, match="older rtrl"):
        CheckpointInfo.from_json_dict(old)
    with pytest.raises(ValueError, match="lora"):
        CheckpointInfo.from_json_dict(
            {**data, "weights": {"kind": "lora", "file": "a", "sha256": "0" * 64}}
        )
