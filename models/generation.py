"""One completion as a model gave it: the checkpoint, the prompt and completion token ids and
the behaviour log-probabilities exactly as sampled (an engine may leave some out: then they are
``None``, never guessed), the text and the finish reason.

Every engine answers with one (the gateway's backends, llama.cpp's evals sampler); the gateway
turns it into the OpenAI response and the rollout (``serving.generation``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from models.rollout import ModelIdentity

if TYPE_CHECKING:
    from models.constraint import Constraint
    from models.tool_format import Call

Alternatives = tuple[tuple[str, float], ...]  # a position's likeliest tokens, most likely first


@dataclass(frozen=True)
class Generation:
    checkpoint_id: str
    model: ModelIdentity | None  # of the checkpoint; None when the gateway cannot know it
    prompt_ids: tuple[int, ...] | None
    token_ids: tuple[int, ...] | None
    logprobs: tuple[float, ...] | None  # of each token, under the sampling distribution
    text: str
    finish_reason: str
    pieces: tuple[str, ...] | None = None  # text of each token; joined, exactly ``text``
    # per token, the likeliest tokens of the distribution it was drawn from (when asked for)
    top_logprobs: tuple[Alternatives, ...] | None = None
    constraint: Constraint | None = None  # the grammar it was decoded under, if any
    # the calls as an upstream read them in its model's own syntax (the gateway passed it the
    # tools); None: the gateway reads ``text`` itself (``serving.tool_calls``)
    tool_calls: tuple[Call, ...] | None = None
    # why the engine knows this completion cannot be a rollout (a reason code, counted), e.g.
    # decoded under a constraint that is not recorded and cannot be replayed
    unrecordable: str | None = None
    # prompt tokens the engine did not evaluate again, reusing its cache (None: not said)
    cached_tokens: int | None = None
