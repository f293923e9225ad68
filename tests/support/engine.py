"""What the llama.cpp tests share: the built server (a test module is skipped only when it is
not built: ``python -m llamacpp.build``) and the learner's scoring of what an engine sampled."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from checkpoints.record import PROMOTED, TrainingRef, WeightsRef
from checkpoints.store import CheckpointRegistry
from checkpoints.weights import model_ref
from infra.kafka_dist import default_cache_root
from llamacpp.build import server_binary
from models.loading import LoadedBase
from models.policy import CausalLMPolicy
from models.rollout import Rollout
from tests.support.gateway import Serve, api_key

CACHE = default_cache_root(os.environ)
BINARY = server_binary(CACHE)
needs_engine = pytest.mark.skipif(
    not BINARY.is_file(),
    reason=f"llama-server is not built at {BINARY} (python -m llamacpp.build)",
)


def base_registry(root: Path, base: LoadedBase, checkpoint_id: str) -> CheckpointRegistry:
    """A registry whose one checkpoint, ``checkpoint_id``, is ``base`` (a GGUF file) itself."""
    registry = CheckpointRegistry(root)
    registry.register(checkpoint_id=checkpoint_id, parent=None, model=model_ref(base),
                      weights=WeightsRef(kind="base"), training=TrainingRef(), files={},
                      evals={}, batches=(), status=PROMOTED)  # fmt: skip
    return registry


def scored(policy: CausalLMPolicy, records: list[Rollout]) -> list[list[float]]:
    """The learner's log-probability of each sampled token, at each rollout's own sampling."""
    with torch.no_grad():
        scores = policy.score(
            [list(r.prompt_ids) for r in records],
            [list(r.completion_ids) for r in records],
            [r.sampling.temperature for r in records],
            [r.sampling.top_p for r in records],
        )
    return [s.tolist() for s in scores]


def engine_gateway(tmp_path: Path, registry: CheckpointRegistry, keys: Path, bootstrap: str,
                   topic_prefix: str, slots: int, max_tokens: int,
                   extra: tuple[str, ...] = ()) -> Serve:  # fmt: skip
    """`rtrl serve --engine llama.cpp` on ``registry``'s checkpoint, not following the topic,
    its API keys in ``keys`` (``extra``: its other options); its log ``front.log`` in
    ``tmp_path``."""
    return Serve(
        ["--registry", str(registry.root), "--key-db", str(keys), "--bootstrap", bootstrap,
         "--topic-prefix", topic_prefix, "--no-follow", "--engine", "llama.cpp",
         "--engine-slots", str(slots), "--max-tokens", str(max_tokens), *extra],
        tmp_path / "front.log",
    )  # fmt: skip


def acme_engine_gateway(tmp_path: Path, base: LoadedBase, bootstrap: str, topic_prefix: str,
                        slots: int, max_tokens: int,
                        extra: tuple[str, ...] = ()) -> tuple[Serve, str]:  # fmt: skip
    """:func:`engine_gateway` on ``base`` as checkpoint ``smol-0000``, and an API key of the
    organisation acme."""
    registry = base_registry(tmp_path / "registry", base, "smol-0000")
    keys = tmp_path / "keys.sqlite"
    key = api_key(keys, "acme")
    gateway = engine_gateway(tmp_path, registry, keys, bootstrap, topic_prefix, slots, max_tokens,
                             extra)  # fmt: skip
    return gateway, key
