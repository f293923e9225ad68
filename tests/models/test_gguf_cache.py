"""A GGUF base is dequantized once: the next load reads the cached copy, and gets the very
same model (every tensor bit for bit, the same tokenizer definition and chat template, the
same answers) under the GGUF's own name and content hash."""

from __future__ import annotations

import shutil

import pytest
import torch

from models import gguf_cache
from models.catalog import fetch, models_dir
from models.loading import load_base

pytestmark = pytest.mark.slow


def test_the_second_load_reads_the_cache_and_gets_the_same_model(tmp_path):
    gguf = tmp_path / "base.gguf"
    shutil.copyfile(fetch("smollm2-135m", models_dir()), gguf)
    first = load_base(gguf)
    folder = gguf_cache.cache_dir(gguf, first.sha256)
    assert (folder / gguf_cache.WEIGHTS).is_file()
    assert "quantization_config" not in (folder / "config.json").read_text()
    cached = gguf_cache.load_cached(folder)
    assert cached is not None  # what load_base reads now
    second = load_base(gguf, expect_sha256=first.sha256)
    assert (second.path, second.sha256, second.family, second.tokenizer_sha256) == (
        first.path, first.sha256, first.family, first.tokenizer_sha256,
    )  # fmt: skip
    a, b = first.model.state_dict(), second.model.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert not second.model.training
    chat = [{"role": "user", "content": "Write `reverse(xs)` in Python."}]
    ids = first.tokenizer.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)
    assert ids == second.tokenizer.apply_chat_template(chat, add_generation_prompt=True,
                                                        tokenize=False)  # fmt: skip
    tokens = torch.tensor([first.tokenizer(ids, add_special_tokens=False).input_ids])
    with torch.no_grad():
        assert torch.equal(first.model(tokens).logits, second.model(tokens).logits)


def test_an_incomplete_cache_is_not_read_and_the_load_dequantizes(tmp_path):
    gguf = tmp_path / "base.gguf"
    shutil.copyfile(fetch("smollm2-135m", models_dir()), gguf)
    from models.catalog import file_sha256

    folder = gguf_cache.cache_dir(gguf, file_sha256(gguf))
    folder.mkdir()
    (folder / "config.json").write_text("{}")  # a writer died before the weights
    assert gguf_cache.load_cached(folder) is None
    loaded = load_base(gguf)  # dequantized from the file; the stale folder is left as it is
    assert loaded.family == "llama" and not (folder / gguf_cache.WEIGHTS).exists()
