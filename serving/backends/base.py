"""What a backend is: the protocol that ``local`` and ``upstream`` implement and that the
orchestrator (``completions``) and the routing (``assignment``) call, and what it is asked.

A backend binds a request to a loaded checkpoint when it is admitted (:meth:`Backend.target`),
so that a switch of checkpoint while the request waits or runs never changes what serves it,
and answers it with a :class:`~models.generation.Generation`; a local backend may also pass
each token to ``on_step`` as it is drawn, for a stream.

Each completion reaches the backend as one :class:`BackendRequest`: the bound target, the parsed
request and its body as sent, the sampling parameters and, for a chat, the spliced prompt of an
extending call and the grammar its tool choice requires. A backend's target type is its own
(``Served``, ``Route``), so that a backend reads its target typed; the orchestrator, which only
hands targets over, holds a ``Backend[Any]``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeGuard, TypeVar

from checkpoints.record import CheckpointInfo
from models.constraint import Constraint
from models.generation import Generation
from models.sampling import SamplingParams
from serving.protocol import ChatCompletionRequest, CompletionRequest
from serving.splice import Splice
from serving.stream import Step

OnStep = Callable[[Step], None]
TargetT = TypeVar("TargetT")
RequestT = TypeVar("RequestT", bound=ChatCompletionRequest | CompletionRequest)


@dataclass(frozen=True, slots=True)
class BackendRequest(Generic[TargetT, RequestT]):
    """One admitted completion as a backend is asked it. ``raw``: the request's body as sent
    (its set fields), which an upstream forwards; ``on_step``: told each token as it is drawn
    (a backend that does not stream never calls it); ``splice``: an extending call's prompt,
    from the earlier call's ids; ``constraint``: the grammar the answer must be decoded under
    (only a backend that constrains gets one); ``tenant``: the organisation it is asked for,
    whose caches alone it may use ("" without keys)."""

    target: TargetT
    request: RequestT
    raw: dict[str, Any]
    params: SamplingParams
    on_step: OnStep | None = None
    splice: Splice | None = None
    constraint: Constraint | None = None
    tenant: str = ""


def is_chat(
    asked: BackendRequest[TargetT, Any],
) -> TypeGuard[BackendRequest[TargetT, ChatCompletionRequest]]:
    """Whether ``asked`` is a chat completion (else a legacy completion)."""
    return isinstance(asked.request, ChatCompletionRequest)


class Backend(Protocol[TargetT]):
    """``target`` binds a request to a loaded checkpoint (an object with its ``checkpoint_id``);
    ``chat``/``complete`` may pass each token to the request's ``on_step`` as it is drawn (or
    never). ``models`` are the names it serves: the followed checkpoint's id first."""

    kind: str
    switches: int

    def target(self, checkpoint: str, model: str = "") -> TargetT: ...
    def models(self) -> list[str]: ...
    def take_up(self, info: CheckpointInfo) -> bool: ...
    def pin(self, info: CheckpointInfo) -> None: ...
    def unpin(self, checkpoint_id: str) -> None: ...
    @property
    def current_id(self) -> str: ...
    async def chat(self, asked: BackendRequest[TargetT, ChatCompletionRequest]) -> Generation: ...
    async def complete(self, asked: BackendRequest[TargetT, CompletionRequest]) -> Generation: ...
    def ready(self) -> bool: ...
    async def close(self) -> None: ...
