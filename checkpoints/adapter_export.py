"""A LoRA checkpoint as a peft adapter directory: what vLLM's ``load_lora_adapter`` and
llama.cpp's LoRA converter read (``adapter_config.json`` beside ``adapter_model.safetensors``).

Written once per checkpoint, atomically (a temporary folder renamed into place), from the
registry's adapter file after its sha256 is checked, so a reader never sees half an adapter.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from checkpoints.record import CheckpointInfo
from checkpoints.store import CheckpointRegistry

ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"


def export_adapter(registry: CheckpointRegistry, info: CheckpointInfo, root: Path) -> Path:
    """A LoRA checkpoint as a peft adapter directory ``root/<checkpoint_id>`` (written once,
    atomically; the adapter file checked against its sha256 first)."""
    from models.loading import lora_config

    weights = info.weights
    if weights.kind != "lora" or weights.file is None or weights.lora is None:
        raise ValueError(f"{info.checkpoint_id} is a {weights.kind} checkpoint, not an adapter")
    target = root / info.checkpoint_id
    if (target / ADAPTER_CONFIG).is_file():
        return target
    root.mkdir(parents=True, exist_ok=True)
    source = registry.checked_file(info, weights.file, weights.sha256)
    tmp = Path(tempfile.mkdtemp(prefix=f".{info.checkpoint_id}-", dir=root))
    try:
        lora_config(weights.lora, base=info.model.base_path).save_pretrained(str(tmp))
        shutil.copyfile(source, tmp / ADAPTER_WEIGHTS)
        os.rename(tmp, target)
    except OSError:
        if not (target / ADAPTER_CONFIG).is_file():
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target
