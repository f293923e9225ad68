"""A tiny causal language model built from a config, for tests and quick local runs.

Nothing is downloaded: the tokenizer is a byte-level BPE trained with ``tokenizers`` on text
generated here (small Python functions and chat turns), the model a Llama-architecture config
with freshly initialised weights. It is saved as an ordinary Hugging Face directory
(``config.json``, ``model.safetensors``, ``tokenizer.json``) and loaded by exactly the code that
loads any other model, so tests exercise the real path. The build is deterministic: the same
version builds the same bytes, so its content hash is stable.
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
from pathlib import Path
from typing import Any

TINY_VERSION = 2  # 2: a context of 8,192 positions, SmolLM2's (1 had 1,024)
TINY_DIR = f"tiny-llama-v{TINY_VERSION}"
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|pad|>"]
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{{ message['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
_NAMES = ["slugify", "reverse", "count_words", "is_prime", "flatten", "dedupe", "clamp",
          "mean", "title_case", "chunks", "parse_int", "merge"]  # fmt: skip
_ARGS = ["s", "xs", "n", "items", "text", "value", "a, b", "lo, hi"]
_BODIES = ["return {a}", "return sorted({a})", "return len({a})", "return [x for x in {a}]",
           "if not {a}:\n        return None\n    return {a}", "return {a}.strip().lower()",
           "total = 0\n    for x in {a}:\n        total += x\n    return total"]  # fmt: skip


def corpus(lines: int = 3000, seed: int = 0) -> list[str]:
    """Generated training text: small Python functions inside chat turns."""
    rng = random.Random(seed)
    out = []
    for _ in range(lines):
        name, arg = rng.choice(_NAMES), rng.choice(_ARGS)
        body = rng.choice(_BODIES).format(a=arg.split(",")[0])
        out.append(
            f"<|im_start|>user\nWrite `{name}({arg})` in Python.<|im_end|>\n"
            f"<|im_start|>assistant\n```python\ndef {name}({arg}):\n    {body}\n```"
            "<|im_end|>"
        )
    return out


def build_tokenizer(vocab_size: int = 512):  # -> PreTrainedTokenizerFast
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(corpus(), trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token=None,
        eos_token="<|im_end|>",
        pad_token="<|pad|>",
        unk_token=None,
        chat_template=CHAT_TEMPLATE,
    )


def build(out: Path, seed: int = 0, hidden: int = 64, layers: int = 2) -> Path:
    """Write the tiny model and its tokenizer into ``out`` (a new directory)."""
    from transformers import LlamaConfig

    tokenizer = build_tokenizer()
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=2 * hidden,
        num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=8192, tie_word_embeddings=True, attention_dropout=0.0,
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None)  # fmt: skip
    return save_random_llama(config, tokenizer, out, seed)


def save_random_llama(config: Any, tokenizer: Any, out: Path, seed: int = 0) -> Path:
    """A Llama of ``config`` with seeded random weights (the global generator left as it
    was), saved with ``tokenizer`` into ``out``."""
    import torch
    from transformers import LlamaForCausalLM

    state = torch.random.get_rng_state()
    try:
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    finally:
        torch.random.set_rng_state(state)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def ensure_tiny_model(cache: Path) -> Path:
    """The tiny model's directory in ``cache``, built the first time (atomically)."""
    target = cache / TINY_DIR
    if (target / "config.json").is_file():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tiny-", dir=cache))
    try:
        build(tmp)
        try:
            os.rename(tmp, target)
        except OSError:  # built meanwhile by another process: theirs is the same bytes
            pass
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target
