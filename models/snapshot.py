"""A policy as it was before an update, on the same model in memory.

A training round compares its candidate with its parent (the gate's candidate evals). The
candidate is the parent plus an update of its trainable parameters (a LoRA adapter, or every
weight), so the parent is those parameters' values from before the update: kept aside, they
make the parent again without loading it a second time (about 24 s for SmolLM2 from its GGUF
on a CPU) or holding a second model.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch

from models.policy import CausalLMPolicy, Completion
from models.sampling import SamplingParams

Snapshot = dict[str, torch.Tensor]


def trainable_snapshot(policy: CausalLMPolicy) -> Snapshot:
    """A copy of the parameters an update may change (those that require a gradient)."""
    return {
        name: p.detach().clone() for name, p in policy.model.named_parameters() if p.requires_grad
    }


class SnapshotPolicy(CausalLMPolicy):
    """``policy``'s model with the trainable parameters of ``snapshot``: each call swaps them
    in and the current values back after, so ``policy`` itself is unchanged between calls.
    Not for use while ``policy`` is being trained or called from another thread."""

    def __init__(self, policy: CausalLMPolicy, snapshot: Snapshot) -> None:
        super().__init__(policy.model, policy.tokenizer)
        params = dict(policy.model.named_parameters())
        missing = sorted(set(snapshot) - set(params))
        if missing:
            raise ValueError(f"the snapshot names parameters the model lacks: {missing[:3]}")
        self._params = {name: params[name] for name in snapshot}
        self._snapshot = snapshot

    @contextmanager
    def _swapped(self) -> Iterator[None]:
        current = {name: p.detach().clone() for name, p in self._params.items()}
        with torch.no_grad():
            for name, p in self._params.items():
                p.copy_(self._snapshot[name])
        try:
            yield
        finally:
            with torch.no_grad():
                for name, p in self._params.items():
                    p.copy_(current[name])

    def sample(
        self,
        prompts: Sequence[Sequence[int]],
        params: SamplingParams,
        generator: torch.Generator,
        *args: Any,
        **kwargs: Any,
    ) -> list[Completion]:
        with self._swapped():
            return super().sample(prompts, params, generator, *args, **kwargs)

    def score(self, *args: Any, **kwargs: Any) -> list[torch.Tensor]:
        """As :meth:`CausalLMPolicy.score`, without gradients (the values it computed from are
        swapped back out before a backward pass could use them)."""
        with self._swapped(), torch.no_grad():
            return super().score(*args, **kwargs)
