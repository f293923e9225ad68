"""The candidate evals sampled by llama.cpp (``rtrl train --eval-engine llama.cpp``): the
parent and the candidate each on a llama-server of its own, on the GGUF files the gateway serves
them from.

Why: a code-world round's candidate evals are 72 answers of SmolLM2 (36 a checkpoint); the
transformers sampler takes ~80 s for them on two cores, a third of a round, where llama.cpp
decodes three to four times faster. With an exact engine (``EngineSettings.exact``) both sample
the learner's own weights, so the paired comparison is of the same two distributions.

The candidate is not registered yet: its adapter is converted from memory
(``serving.llamacpp_convert.candidate_lora_gguf``), under the name the registered adapter
would get, so a promoted candidate is found converted when the gateway switches to it. Only a
LoRA candidate goes this way: full weights take a minute to convert, and are sampled by
transformers as before.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from checkpoints.record import CheckpointInfo
from checkpoints.store import CheckpointRegistry
from models.loading import LoraSettings, adapter_state
from models.policy import CausalLMPolicy

if TYPE_CHECKING:
    from serving.llamacpp_fleet import EngineSettings
    from serving.llamacpp_sampler import EngineSampler


@contextmanager
def engine_pair(settings: EngineSettings, registry: CheckpointRegistry, parent: CheckpointInfo,
                candidate_id: str, candidate: CausalLMPolicy,
                lora: LoraSettings) -> Iterator[tuple[EngineSampler, EngineSampler]]:  # fmt: skip
    """Samplers of ``parent`` and of the trained ``candidate`` (a LoRA adapter over the same
    base), each on a server of its own (both stopped on the way out). The paired evals sample
    one checkpoint after the other, so each server has every thread while it decodes."""
    from serving.llamacpp_convert import (
        EngineWeights,
        candidate_lora_gguf,
        converted_dir,
        engine_weights,
    )
    from serving.llamacpp_sampler import weights_sampler

    out_dir = settings.converted_dir or converted_dir(settings.cache_root)
    parent_files = engine_weights(registry, parent, settings.cache_root, settings.outtype,
                                  out_dir=out_dir, exact=settings.exact)  # fmt: skip
    adapter = candidate_lora_gguf(
        adapter_state(candidate.model), lora, parent.model, settings.cache_root, out_dir
    )
    candidate_files = EngineWeights(parent_files.model, adapter)
    with (
        weights_sampler(settings, registry, parent.checkpoint_id, parent_files) as before,
        weights_sampler(settings, registry, candidate_id, candidate_files) as after,
    ):
        yield before, after
