"""A GGUF base dequantized once, kept beside it in the Hugging Face layout.

transformers dequantizes a GGUF file tensor by tensor on every load: ~20 s for SmolLM2-135M's
on two cores, paid by every process that loads it (each training round, each held-out eval of
`rtrl run`). The dequantized float32 weights, the tokenizer and the config are written once
next to the file, named by its content sha256 and the transformers version that dequantized
it, and read back in about a second. The weights are the same tensors bit for bit
(``tests/models/test_gguf_cache.py``), the tokenizer the same definition.

Writing is best effort: where the GGUF's folder is read-only, every load dequantizes again.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch

log = logging.getLogger(__name__)
WEIGHTS = "model.safetensors"


def cache_dir(gguf: Path, digest: str) -> Path:
    import transformers

    return gguf.parent / f".{gguf.stem}-{digest[:16]}-transformers-{transformers.__version__}"


def load_cached(folder: Path) -> tuple[Any, Any] | None:
    """The model (float32, CPU, eval mode) and tokenizer cached in ``folder``; None when
    there is no complete cache there."""
    if not (folder / WEIGHTS).is_file():
        return None
    from safetensors.torch import load_model
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    config = AutoConfig.from_pretrained(str(folder), local_files_only=True)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    load_model(model, str(folder / WEIGHTS))
    return model.eval(), tokenizer


def save_cache(folder: Path, model: Any, tokenizer: Any) -> None:
    """Write the cache whole or not at all: into a temporary folder renamed into place, so a
    reader never sees half of one and two writers at once leave one."""
    from safetensors.torch import save_model

    try:
        part = Path(tempfile.mkdtemp(prefix=folder.name + ".", dir=folder.parent))
    except OSError as exc:
        log.info("cannot cache the dequantized base beside it (%s): it is dequantized on "
                 "every load", exc)  # fmt: skip
        return
    try:
        tokenizer.save_pretrained(str(part))
        config = model.config.to_dict()
        config.pop("quantization_config", None)  # these weights are plain float32
        (part / "config.json").write_text(json.dumps(config, indent=2))
        save_model(model, str(part / WEIGHTS))  # tied embeddings: stored once
        os.rename(part, folder)
        log.info("cached the dequantized base in %s", folder)
    except OSError:  # another process put its cache there first: keep that one
        shutil.rmtree(part, ignore_errors=True)
