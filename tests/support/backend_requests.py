"""A backend asked directly, as the gateway asks it (``serving.backends.base.BackendRequest``),
from a request body: for the tests that call a backend without a gateway in front."""

from __future__ import annotations

from typing import Any, TypeVar

from models.sampling import SamplingParams
from serving.backends.base import BackendRequest
from serving.protocol import ChatCompletionRequest, CompletionRequest

T = TypeVar("T")


def chat_asked(
    target: T, raw: dict[str, Any], params: SamplingParams
) -> BackendRequest[T, ChatCompletionRequest]:
    """A chat completion with body ``raw``, bound to ``target``."""
    return BackendRequest(target, ChatCompletionRequest.model_validate(raw), raw, params)


def completion_asked(
    target: T, raw: dict[str, Any], params: SamplingParams
) -> BackendRequest[T, CompletionRequest]:
    """A (legacy) completion with body ``raw``, bound to ``target``."""
    return BackendRequest(target, CompletionRequest.model_validate(raw), raw, params)
