"""What a backend is: the protocol that ``local`` and ``upstream`` implement and that the
orchestrator (``completions``) and the routing (``assignment``) call.

A backend binds a request to a loaded checkpoint when it is admitted (:meth:`Backend.target`),
so that a switch of checkpoint while the request waits or runs never changes what serves it,
and answers it with a :class:`~serving.generation.Generation`; a local backend may also pass
each token to ``on_step`` as it is drawn, for a stream.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from checkpoints.record import CheckpointInfo
from models.generation import Generation
from models.sampling import SamplingParams
from serving.protocol import ChatCompletionRequest, CompletionRequest
from serving.splice import Splice
from serving.stream import Step

OnStep = Callable[[Step], None]


class Backend(Protocol):
    """``target`` binds a request to a loaded checkpoint (an object with its ``checkpoint_id``);
    ``chat``/``complete`` may pass each token to ``on_step`` as it is drawn (or never).
    ``models`` are the names it serves: the followed checkpoint's id first."""

    kind: str
    switches: int

    def target(self, checkpoint: str, model: str = "") -> Any: ...
    def models(self) -> list[str]: ...
    def take_up(self, info: CheckpointInfo) -> bool: ...
    def pin(self, info: CheckpointInfo) -> None: ...
    def unpin(self, checkpoint_id: str) -> None: ...
    @property
    def current_id(self) -> str: ...
    async def chat(
        self,
        target: Any,
        request: ChatCompletionRequest,
        raw: dict[str, Any],
        params: SamplingParams,
        on_step: OnStep | None = None,
        splice: Splice | None = None,
    ) -> Generation: ...
    async def complete(
        self,
        target: Any,
        request: CompletionRequest,
        raw: dict[str, Any],
        params: SamplingParams,
        on_step: OnStep | None = None,
    ) -> Generation: ...
    def ready(self) -> bool: ...
    async def close(self) -> None: ...
