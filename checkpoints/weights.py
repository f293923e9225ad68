"""From registry entries to policies and back: what each kind of checkpoint stores and loads.

Kept apart from the registry, which knows directories, atomic renames and hashes but not models.
A ``base`` checkpoint loads its base model; ``full`` loads the base's architecture and replaces
every weight; ``lora`` wraps the base with peft and loads the adapter. The trainer state
(``trainer_state.pt``: optimizer moments and random generator states) is a plain dict of tensors,
loaded with ``weights_only=True``, so it can hold no code.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file, save_model
from safetensors.torch import load_model as load_model_weights

from checkpoints.record import CheckpointInfo, ModelRef, WeightsRef
from checkpoints.store import CheckpointRegistry
from models.loading import (
    LoadedBase,
    LoraSettings,
    adapter_state,
    load_adapter_state,
    load_base,
    with_lora,
)
from models.policy import CausalLMPolicy

FULL_FILE = "model.safetensors"
ADAPTER_FILE = "adapter.safetensors"
STATE_FILE = "trainer_state.pt"


def model_ref(base: LoadedBase) -> ModelRef:
    return ModelRef(
        family=base.family,
        base_path=str(base.path),
        base_sha256=base.sha256,
        tokenizer_sha256=base.tokenizer_sha256,
    )


def load_policy(
    registry: CheckpointRegistry, info: CheckpointInfo, new_lora: LoraSettings | None = None
) -> CausalLMPolicy:
    """The checkpoint's policy on the CPU. ``new_lora`` adds a fresh adapter to a base or full
    checkpoint (to train it with LoRA); a lora checkpoint's own adapter is always trainable."""
    base = load_base(Path(info.model.base_path), expect_sha256=info.model.base_sha256)
    if base.tokenizer_sha256 != info.model.tokenizer_sha256:
        raise ValueError(
            f"{info.checkpoint_id}: the base's tokenizer has another hash than the registered one"
        )
    model: Any = base.model
    weights = info.weights
    if weights.kind == "full":
        assert weights.file is not None
        path = registry.checked_file(info, weights.file, weights.sha256)
        missing, unexpected = load_model_weights(model, str(path), strict=True)
        if missing or unexpected:
            raise ValueError(
                f"{path}: weights do not fit the base ({missing[:2]}, {unexpected[:2]})"
            )
    if weights.kind == "lora":
        assert weights.file is not None and weights.lora is not None
        if new_lora is not None and new_lora != weights.lora:
            raise ValueError(
                f"{info.checkpoint_id} has a LoRA adapter {weights.lora}; it is "
                f"trained as it is, not with {new_lora}"
            )
        path = registry.checked_file(info, weights.file, weights.sha256)
        model = with_lora(model, weights.lora)
        load_adapter_state(model, load_file(str(path)))
    elif new_lora is not None:
        model = with_lora(model, new_lora)
    return CausalLMPolicy(model, base.tokenizer)


def load_trainer_state(registry: CheckpointRegistry, info: CheckpointInfo) -> dict[str, Any] | None:
    """The optimizer moments and generator states the checkpoint was saved with, if any."""
    if info.training.file is None:
        return None
    path = registry.checked_file(info, info.training.file, info.training.sha256)
    return torch.load(path, map_location="cpu", weights_only=True)


def weight_writers(policy: CausalLMPolicy, lora: LoraSettings | None,
                   optimizer_state: dict[str, Any] | None
                   ) -> tuple[WeightsRef, dict[str, Callable[[Path], None]]]:  # fmt: skip
    """What to store for a trained policy: its adapter (LoRA) or all its weights, and the
    trainer state."""
    files: dict[str, Callable[[Path], None]] = {}
    if lora is not None:
        tensors = adapter_state(policy.model)
        files[ADAPTER_FILE] = lambda p: save_file(tensors, str(p))
        weights = WeightsRef(kind="lora", file=ADAPTER_FILE, sha256="0" * 64, lora=lora)
    else:
        model = policy.model
        files[FULL_FILE] = lambda p: save_model(model, str(p))
        weights = WeightsRef(kind="full", file=FULL_FILE, sha256="0" * 64)
    if optimizer_state is not None:
        state = {"optimizer": optimizer_state, "torch_rng": torch.get_rng_state()}
        files[STATE_FILE] = lambda p: torch.save(state, p)
    return weights, files


def register_base(
    registry: CheckpointRegistry,
    checkpoint_id: str,
    base_path: Path,
    evals: dict[str, Any] | None = None,
) -> CheckpointInfo:
    """A root checkpoint that is its base model, promoted: nothing is copied, the base is
    named by its path and content hash."""
    from checkpoints.record import PROMOTED, TrainingRef

    base = load_base(base_path)
    return registry.register(
        checkpoint_id=checkpoint_id,
        parent=None,
        model=model_ref(base),
        weights=WeightsRef(kind="base"),
        training=TrainingRef(),
        files={},
        evals=evals or {},
        batches=(),
        status=PROMOTED,
    )


def copy_as(
    registry: CheckpointRegistry, old: CheckpointInfo, checkpoint_id: str, evals: dict[str, Any]
) -> CheckpointInfo:
    """``old``'s weights under a new id, promoted (a rollback: serving only moves forward)."""
    from checkpoints.record import PROMOTED

    files: dict[str, Callable[[Path], None]] = {}
    for name, sha in ((old.weights.file, old.weights.sha256),
                      (old.training.file, old.training.sha256)):  # fmt: skip
        if name is not None:
            source = registry.checked_file(old, name, sha)
            files[name] = partial(_copy, source)
    return registry.register(
        checkpoint_id=checkpoint_id,
        parent=old.checkpoint_id,
        model=old.model,
        weights=old.weights,
        training=old.training,
        files=files,
        evals=evals,
        batches=(),
        status=PROMOTED,
    )


def _copy(source: Path, target: Path) -> None:
    import shutil

    shutil.copyfile(source, target)
