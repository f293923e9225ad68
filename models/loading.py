"""Loading a base model and naming it by content: what a checkpoint is built on.

A base is a local directory in the Hugging Face layout (``config.json``, safetensors weights,
tokenizer files) or a local GGUF file, which transformers dequantizes on load (tokenizer and chat
template come from the same file). Nothing is fetched from a model hub: every load is
``local_files_only``. A base is named by the sha256 of its content, so a checkpoint that stores
only an adapter (LoRA) can say exactly which weights it adapts, and loading refuses a base
whose content changed.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from models import gguf_cache
from models.catalog import file_sha256
from models.lora_settings import LoraSettings

_WEIGHT_FILES = (".safetensors", ".json", ".jinja", ".model", ".txt", ".gguf")


def content_sha256(path: Path) -> str:
    """sha256 of a file, or of a directory's files (names and contents, in name order)."""
    path = Path(path)
    if path.is_file():
        return file_sha256(path)
    digest = hashlib.sha256()
    for item in sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in _WEIGHT_FILES):
        digest.update(str(item.relative_to(path)).encode() + b"\0")
        digest.update(file_sha256(item).encode() + b"\0")
    return digest.hexdigest()


def tokenizer_sha256(tokenizer: Any) -> str:
    """sha256 of the tokenizer's full definition (vocabulary, merges, normaliser, special
    tokens) and its chat template: two tokenizers with one hash turn text into the same ids."""
    backend = tokenizer.backend_tokenizer.to_str()
    template = tokenizer.chat_template or ""
    return hashlib.sha256(backend.encode() + b"\0" + str(template).encode()).hexdigest()


@dataclass(frozen=True)
class LoadedBase:
    model: Any  # a transformers PreTrainedModel
    tokenizer: Any
    path: Path
    sha256: str
    family: str  # the config's model_type: llama, qwen2, ...
    tokenizer_sha256: str


def load_base(path: Path, expect_sha256: str | None = None) -> LoadedBase:
    """The model and tokenizer at ``path``, in float32 on the CPU; ``expect_sha256`` refuses a
    base whose content is not the one a checkpoint was built on. A GGUF file is dequantized
    once and read from its cache after (``models.gguf_cache``)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = Path(path).resolve()
    digest = content_sha256(path)
    if expect_sha256 is not None and digest != expect_sha256:
        raise ValueError(
            f"base model {path} has content sha256 {digest}, but the checkpoint "
            f"was built on {expect_sha256}: it changed or is another model"
        )
    if path.is_file():
        if path.suffix != ".gguf":
            raise ValueError(
                f"{path}: a model file must be GGUF (.gguf); a directory in the "
                "Hugging Face layout is the other choice"
            )
        where, extra = str(path.parent), {"gguf_file": path.name}
    elif (path / "config.json").is_file():
        where, extra = str(path), {}
    else:
        raise ValueError(f"{path}: neither a .gguf file nor a model directory with config.json")
    cached = gguf_cache.cache_dir(path, digest) if extra else None
    loaded = gguf_cache.load_cached(cached) if cached else None
    if loaded is not None:
        model, tokenizer = loaded
    else:
        tokenizer = AutoTokenizer.from_pretrained(where, local_files_only=True, **extra)
        model = AutoModelForCausalLM.from_pretrained(
            where, local_files_only=True, dtype=torch.float32, **extra
        )
        if cached:
            gguf_cache.save_cache(cached, model, tokenizer)
    return LoadedBase(
        model, tokenizer, path, digest, str(model.config.model_type), tokenizer_sha256(tokenizer)
    )


def lora_config(settings: LoraSettings, base: str | None = None) -> Any:
    """peft's ``LoraConfig`` of these settings (``base``: the base model it names, as an
    adapter directory for another server records it)."""
    from peft import LoraConfig

    return LoraConfig(
        r=settings.r,
        lora_alpha=settings.alpha,
        lora_dropout=settings.dropout,
        target_modules=list(settings.targets),
        bias="none",
        task_type="CAUSAL_LM",
        base_model_name_or_path=base,
    )


def with_lora(model: Any, settings: LoraSettings) -> Any:
    """``model`` wrapped by peft with a fresh adapter; only the adapter is trainable."""
    from peft import get_peft_model

    return get_peft_model(model, lora_config(settings))


def adapter_state(model: Any) -> dict[str, torch.Tensor]:
    from peft import get_peft_model_state_dict

    return {k: v.detach().cpu().contiguous() for k, v in get_peft_model_state_dict(model).items()}


def load_adapter_state(model: Any, tensors: dict[str, torch.Tensor]) -> None:
    from peft import set_peft_model_state_dict

    result = set_peft_model_state_dict(model, tensors)
    unexpected = getattr(result, "unexpected_keys", [])
    if unexpected:
        raise ValueError(f"adapter holds tensors the model has no place for: {unexpected[:3]}")
