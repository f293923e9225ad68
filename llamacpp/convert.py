"""A checkpoint as the files llama-server loads: a GGUF model and, for a LoRA checkpoint, a GGUF
adapter, made by llama.cpp's own converters.

The converters are those of the pinned llama.cpp tree the server is built from
(``llamacpp.build``): ``convert_lora_to_gguf.py`` and ``convert_hf_to_gguf.py``, each run
as a child process in that tree (so it imports the tree's own ``gguf-py`` and ``conversion``
package), offline (``HF_HUB_OFFLINE=1``). By kind of checkpoint:

- ``base``: its GGUF file as it is; a base in the Hugging Face layout is converted once. With
  ``exact``, a quantized GGUF base is served as the learner computes it (its dequantized
  weights at ``outtype``, :func:`dequantized_base`), and so is the base under a LoRA adapter.
- ``lora``: the adapter written as a peft directory
  (``checkpoints.adapter_export.export_adapter``), then
  converted against the base's ``config.json`` (the converter reads only hyper-parameters there;
  for a GGUF base they are written from the GGUF's metadata by transformers, no weights). The
  server applies the f32 adapter to the base's own (possibly quantized) weights.
- ``full``: the weights loaded as the learner loads them (``checkpoints.weights.load_policy``),
  written as safetensors beside the base's config and tokenizer, converted to ``outtype``
  (f16 by default: half the file, and a per-token mismatch far under the trainer's limit). For a
  GGUF base, the tokenizer transformers derives from the GGUF is not the GGUF's own (the
  converter reads it back as a SentencePiece-style vocabulary), so the converted file is given
  the base GGUF's ``tokenizer.*`` metadata instead: the server tokenizes exactly as on the base.
  That rewrite (``llamacpp.gguf_tokenizer``) uses the ``gguf`` package (pinned at the tree's
  gguf-py version, 0.19.0).

Converted files are cached under ``<cache>/llama.cpp/<version>/converted/``, named by content
(adapter and base sha256, weights sha256 and type), written atomically: a restart, or a rollback
whose copy has the same weights, converts nothing. Each conversion is logged with its time.

    python -m llamacpp.convert --registry R --checkpoint C   # prints the files as JSON

``rtrl serve --engine llama.cpp`` runs exactly that as a child process, so the gateway itself
never loads torch or a model.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from checkpoints.record import CheckpointInfo, ModelRef
from checkpoints.store import CheckpointRegistry
from infra.kafka_dist import default_cache_root
from llamacpp.build import engine_dir, ensure_source
from llamacpp.engine_settings import OUTTYPE, OUTTYPES
from llamacpp.gguf_tokenizer import with_tokenizer_of
from models.catalog import file_sha256

log = logging.getLogger(__name__)
Log = Callable[[str], None]


class ConversionError(RuntimeError):
    """A checkpoint could not be turned into GGUF; the message holds the converter's tail."""


@dataclass(frozen=True)
class EngineWeights:
    """What one llama-server loads: a model file and at most one adapter."""

    model: Path
    lora: Path | None = None

    def to_json(self) -> dict[str, str | None]:
        return {"model": str(self.model), "lora": None if self.lora is None else str(self.lora)}

    @classmethod
    def from_json(cls, data: dict[str, str | None]) -> EngineWeights:
        lora = data.get("lora")
        return cls(Path(str(data["model"])), Path(lora) if lora else None)


def converted_dir(cache_root: Path) -> Path:
    return engine_dir(cache_root) / "converted"


def engine_weights(
    registry: CheckpointRegistry,
    info: CheckpointInfo,
    cache_root: Path,
    outtype: str = OUTTYPE,
    log: Log = log.info,
    out_dir: Path | None = None,
    exact: bool = False,
) -> EngineWeights:
    """The GGUF files that serve ``info``, converted the first time (into ``out_dir``,
    default the cache's ``converted`` folder); ``exact``: a quantized GGUF base as the learner
    computes it (:func:`dequantized_base`)."""
    if outtype not in OUTTYPES:
        raise ValueError(f"outtype {outtype!r}: one of {', '.join(OUTTYPES)}")
    out_dir = out_dir or converted_dir(cache_root)
    if exact and Path(info.model.base_path).is_file():
        base = dequantized_base(info.model, cache_root, out_dir, outtype, log)
    else:
        base = base_gguf(info.model, cache_root, out_dir, outtype, log)
    kind = info.weights.kind
    if kind == "base":
        return EngineWeights(base)
    if kind == "lora":
        return EngineWeights(base, lora_gguf(registry, info, cache_root, out_dir, log))
    return EngineWeights(full_gguf(registry, info, cache_root, out_dir, outtype, log))


def _short(sha: str | None) -> str:
    return (sha or "")[:16]


def _cached(target: Path, make: Callable[[Path], None], what: str, log: Log) -> Path:
    """``target``, made by ``make`` into a temporary name and renamed when it is whole."""
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    part = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}.part")
    started = time.monotonic()
    log(f"llama.cpp: converting {what} to {target.name}")
    try:
        make(part)
        os.replace(part, target)
    finally:
        if part.is_dir():
            shutil.rmtree(part, ignore_errors=True)
        elif part.exists():
            part.unlink()
    log(f"llama.cpp: {what} converted in {time.monotonic() - started:.1f} s ({target})")
    return target


def _convert(script: str, args: list[str], out: Path, cache_root: Path) -> None:
    """One of the tree's converters, as a child process in the tree, offline."""
    src = ensure_source(cache_root, log=lambda line: log.info("%s", line))
    cmd = [sys.executable, str(src / script), *args, "--outfile", str(out)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    done = subprocess.run(cmd, cwd=src, env=env, capture_output=True, text=True)
    if done.returncode != 0 or not out.is_file():
        tail = (done.stdout + done.stderr).strip()[-2000:]
        raise ConversionError(f"{script} failed (exit {done.returncode}):\n{tail}")


def base_gguf(
    model: ModelRef, cache_root: Path, out_dir: Path, outtype: str = OUTTYPE, log: Log = log.info
) -> Path:
    """The base's GGUF file: itself (checked against its recorded sha256), or converted from a
    Hugging Face directory."""
    path = Path(model.base_path)
    if path.is_file():
        digest = file_sha256(path)
    else:
        from models.loading import content_sha256  # torch: only in the converting process

        digest = content_sha256(path)
    if digest != model.base_sha256:
        raise ConversionError(
            f"base {path} has content sha256 {digest}, not the recorded {model.base_sha256}"
        )
    if path.is_file() and path.suffix == ".gguf":
        return path
    target = out_dir / f"base-{_short(digest)}-{outtype}.gguf"
    return _cached(
        target,
        lambda part: _convert(
            "convert_hf_to_gguf.py", [str(path), "--outtype", outtype], part, cache_root
        ),
        f"base {path.name}",
        log,
    )


def dequantized_base(
    model: ModelRef, cache_root: Path, out_dir: Path, outtype: str = OUTTYPE, log: Log = log.info
) -> Path:
    """A GGUF base as the learner computes it: its weights as transformers dequantizes them
    (``models.loading.load_base``), written at ``outtype`` with the base's own tokenizer.

    Why: llama.cpp multiplies a 4-bit file's weights in its own integer kernels, and its
    log-probabilities of SmolLM2's Q4_1 file sit 0.004 nats a token (k3) from the learner's;
    served from this file they sit 1e-5 apart at f16 (bench/RESULTS.md), for a file 2-4
    times larger."""
    path = Path(model.base_path)

    def convert(part: Path) -> None:
        from models.loading import load_base

        loaded = load_base(path, expect_sha256=model.base_sha256)
        _model_gguf(loaded.model, loaded.tokenizer, path, outtype, part, cache_root)

    target = out_dir / f"base-{_short(model.base_sha256)}-dequantized-{outtype}.gguf"
    return _cached(target, convert, f"base {path.name} as the learner computes it", log)


def _write_config(config: object, out: Path) -> None:
    """A transformers config as the converters read it: with its architecture named, without
    the GGUF quantization note."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    data = config.to_dict()  # type: ignore[attr-defined]
    data.pop("quantization_config", None)
    data["architectures"] = [MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[data["model_type"]]]
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(data, indent=2))


def base_config_dir(model: ModelRef, out_dir: Path, log: Log = log.info) -> Path:
    """A directory with the base's ``config.json``: the base itself, or written once from a
    GGUF's metadata."""
    path = Path(model.base_path)
    if path.is_dir():
        return path

    def write(part: Path) -> None:
        from transformers import AutoConfig

        where = {"gguf_file": path.name, "local_files_only": True}
        _write_config(AutoConfig.from_pretrained(str(path.parent), **where), part)

    target = out_dir / f"config-{_short(model.base_sha256)}"
    return _cached(target, write, f"the config of {path.name}", log)


def lora_gguf(
    registry: CheckpointRegistry,
    info: CheckpointInfo,
    cache_root: Path,
    out_dir: Path,
    log: Log = log.info,
) -> Path:
    """The checkpoint's adapter as a GGUF LoRA adapter over its base."""
    from checkpoints.adapter_export import export_adapter

    name = _lora_name(info.weights.sha256, info.model.base_sha256)
    config = base_config_dir(info.model, out_dir, log)

    def convert(part: Path) -> None:
        with tempfile.TemporaryDirectory(dir=part.parent) as tmp:
            peft_dir = export_adapter(registry, info, Path(tmp))
            args = ["--base", str(config), "--outtype", "f32", str(peft_dir)]
            _convert("convert_lora_to_gguf.py", args, part, cache_root)

    return _cached(out_dir / name, convert, f"{info.checkpoint_id}'s adapter", log)


def _lora_name(adapter_sha: str | None, base_sha: str | None) -> str:
    return f"lora-{_short(adapter_sha)}-{_short(base_sha)}.gguf"


def candidate_lora_gguf(
    tensors: dict[str, Any],
    lora: Any,  # models.loading.LoraSettings
    model: ModelRef,
    cache_root: Path,
    out_dir: Path,
    log: Log = log.info,
) -> Path:
    """An adapter not registered yet (a candidate the gate is judging: ``tensors``, its
    ``adapter_state``) as a GGUF LoRA adapter, named as :func:`lora_gguf` names the same
    adapter once registered (by the sha256 of its safetensors file, written the same way): a
    promoted candidate is found converted when the gateway switches to it."""
    from safetensors.torch import save_file

    from checkpoints.adapter_export import ADAPTER_WEIGHTS
    from models.loading import lora_config

    out_dir.mkdir(parents=True, exist_ok=True)
    config = base_config_dir(model, out_dir, log)
    with tempfile.TemporaryDirectory(prefix=".candidate-", dir=out_dir) as tmp:
        peft_dir = Path(tmp)
        save_file(tensors, str(peft_dir / ADAPTER_WEIGHTS))
        name = _lora_name(file_sha256(peft_dir / ADAPTER_WEIGHTS), model.base_sha256)
        lora_config(lora, base=model.base_path).save_pretrained(str(peft_dir))

        def convert(part: Path) -> None:
            args = ["--base", str(config), "--outtype", "f32", str(peft_dir)]
            _convert("convert_lora_to_gguf.py", args, part, cache_root)

        return _cached(out_dir / name, convert, "a candidate's adapter", log)


def full_gguf(
    registry: CheckpointRegistry,
    info: CheckpointInfo,
    cache_root: Path,
    out_dir: Path,
    outtype: str = OUTTYPE,
    log: Log = log.info,
) -> Path:
    """The checkpoint's full weights as a GGUF model (with the base GGUF's tokenizer)."""
    name = f"full-{_short(info.weights.sha256)}-{outtype}.gguf"
    base = Path(info.model.base_path)

    def convert(part: Path) -> None:
        from checkpoints.weights import load_policy

        policy = load_policy(registry, info)
        _model_gguf(policy.model, policy.tokenizer, base, outtype, part, cache_root)

    return _cached(out_dir / name, convert, f"{info.checkpoint_id}'s weights", log)


def _model_gguf(model: Any, tokenizer: Any, base: Path, outtype: str, out: Path,
                cache_root: Path) -> None:  # fmt: skip
    """A transformers model converted to a GGUF model at ``outtype``; with a GGUF ``base``,
    given that file's own tokenizer."""
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        hf = Path(tmp) / "hf"
        _write_model(model, tokenizer, hf)
        args = [str(hf), "--outtype", outtype]
        if base.suffix != ".gguf":
            _convert("convert_hf_to_gguf.py", args, out, cache_root)
            return
        plain = Path(tmp) / "weights.gguf"
        _convert("convert_hf_to_gguf.py", args, plain, cache_root)
        with_tokenizer_of(plain, base, out)


def _write_model(model: Any, tokenizer: Any, out: Path) -> None:
    """A transformers model and tokenizer in the Hugging Face layout the converters read:
    config, safetensors, tokenizer (a tied output matrix written once, under the embedding's
    name, as the converters expect)."""
    from safetensors.torch import save_file

    tied = bool(getattr(model.config, "tie_word_embeddings", False))
    state = {
        k: v.detach().contiguous()
        for k, v in model.state_dict().items()
        if not (tied and k == "lm_head.weight")
    }
    _write_config(model.config, out)
    save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
    tokenizer.save_pretrained(str(out))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m llamacpp.convert",
        description="Convert a checkpoint to the GGUF files llama-server loads (cached); print "
        'them as JSON: {"model": PATH, "lora": PATH or null}.',
    )
    parser.add_argument("--registry", type=Path, required=True, help="checkpoint registry")
    parser.add_argument("--checkpoint", required=True, help="checkpoint id")
    parser.add_argument(
        "--out-dir",
        type=Path,
        default=None,
        help="where converted files are kept (default: the cache's llama.cpp/<version>/converted)",
    )
    parser.add_argument(
        "--outtype",
        choices=OUTTYPES,
        default=OUTTYPE,
        help=f"full weights' type in the GGUF file (default {OUTTYPE})",
    )
    parser.add_argument(
        "--exact",
        action="store_true",
        help="a quantized GGUF base as the learner computes it: its dequantized weights at "
        "--outtype (see rtrl serve --engine-exact)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    try:
        registry = CheckpointRegistry(args.registry)
        info = registry.get(args.checkpoint)
        cache = default_cache_root(os.environ)
        weights = engine_weights(
            registry, info, cache, args.outtype, out_dir=args.out_dir, exact=args.exact
        )
    except (ConversionError, ValueError, KeyError, OSError) as exc:
        print(f"llama.cpp conversion: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(weights.to_json()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
