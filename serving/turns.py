"""The gateway's side of agent runs: each chat call recognised (which interaction, which
earlier answer it extends), its prompt spliced from that answer's tokens, and its own answer
remembered for the next call (``serving.trajectory``, ``serving.splice``).

Recognition runs before the arm is assigned, so every call of a run lands on the arm of its
first (the arm follows the user key, and without one the interaction). Every outcome is
counted (``rtrl_gateway_calls_total``): a call that could not be joined is never silently a
new run.
"""

from __future__ import annotations

import json
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from models.generation import Generation
from models.rollout import TurnRef
from models.tool_format import Parsed
from serving.protocol import ChatCompletionRequest
from serving.splice import RE_RENDER, Splice, mode_of
from serving.trajectory import Answer, AnswerMemory, Recognition, digest


@dataclass(frozen=True)
class Turn:
    """One chat call's place in its run: what the rollout records of it."""

    call_id: str  # the answer's id (its response id)
    interaction_id: str
    segment: int
    parent_call_id: str | None  # the answer it extends (None: the first of its segment)
    recognition: Recognition
    splice: Splice | None  # how its prompt is built from the parent's tokens (None: rendered)
    prefix_len: int  # prompt tokens that are the parent's sequence (0 when not spliced)

    def spliced(self, gen: Generation) -> bool:
        """Whether the answer's prompt begins with the parent's sequence (a backend that
        renders its own prompt, an OpenAI-compatible upstream, does not splice)."""
        return (
            self.splice is not None
            and gen.prompt_ids is not None
            and (gen.prompt_ids[: self.prefix_len] == self.splice.prefix_ids)
        )

    def ref(self, gen: Generation, broken_calls: int = 0) -> TurnRef:
        """What the rollout records of it (``broken_calls``: the answer's calls the gateway
        could not read, ``serving.tool_calls.broken_count``)."""
        prefix = self.prefix_len if self.spliced(gen) else 0
        return TurnRef(self.call_id, self.parent_call_id, self.segment, prefix, broken_calls)


def _messages(req: ChatCompletionRequest) -> list[dict[str, Any]]:
    return [m.model_dump(exclude_none=True) for m in req.messages]


def _tools(req: ChatCompletionRequest) -> list[dict[str, Any]] | None:
    return [t.model_dump(exclude_none=True) for t in req.tools] if req.tools else None


class Turns:
    def __init__(self, memory: AnswerMemory, counter: Any) -> None:
        self.memory = memory
        self._counter = counter  # rtrl_gateway_calls, by outcome

    def recognise(self, req: ChatCompletionRequest, scope: str, interaction_id: str | None,
                  org: str = "") -> Recognition:  # fmt: skip
        recognition = self.memory.recognise(_messages(req), _tools(req), scope, interaction_id, org)
        self._counter.labels(recognition.outcome).inc()
        return recognition

    def turn(self, call_id: str, interaction_id: str, recognition: Recognition,
             target: Any, org: str = "") -> Turn:  # fmt: skip
        """The call's turn, once its interaction and checkpoint are known; spliced when its
        parent's tokens are the same vocabulary's and its family splices."""
        parent = recognition.parent
        segment = recognition.segment
        if segment is None:
            segment = self.memory.new_segment(interaction_id, org)
        splice = None
        identity = getattr(target, "identity", None)
        if (
            parent is not None
            and identity is not None
            and parent.tokenizer == identity.tokenizer_sha256
        ):
            if mode_of(identity.family) != RE_RENDER:
                splice = Splice(
                    tuple(parent.sequence()),
                    tuple(parent.completion_ids()),
                    recognition.new_messages,
                )
        return Turn(
            call_id,
            interaction_id,
            segment,
            parent.call_id if parent is not None else None,
            recognition,
            splice,
            len(splice.prefix_ids) if splice is not None else 0,
        )

    def remember(self, turn: Turn, req: ChatCompletionRequest, scope: str, gen: Generation,
                 parsed: Parsed | None, calls: Sequence[Mapping[str, Any]],
                 org: str = "") -> None:  # fmt: skip
        """The call's answer, for the next call of its run to extend (not when the answer
        lacks its token ids: nothing could be spliced from it)."""
        if not gen.prompt_ids or not gen.token_ids or gen.model is None:
            return
        spliced = turn.spliced(gen)
        new_prompt = gen.prompt_ids[turn.prefix_len :] if spliced else gen.prompt_ids
        parent = turn.recognition.parent if spliced else None
        content = gen.text if parsed is None or not parsed.calls else parsed.content or ""
        answer_calls = tuple(
            (
                str(c["id"]),
                str(c["function"]["name"]),
                json.dumps(json.loads(c["function"]["arguments"]), sort_keys=True),
            )
            for c in calls
        )
        self.memory.remember(
            Answer(
                call_id=turn.call_id,
                interaction_id=turn.interaction_id,
                scope=scope,
                org=org,
                segment=turn.segment,
                context=digest(_messages(req), _tools(req)),
                content=content,
                calls=answer_calls,
                new_ids=array("i", [*new_prompt, *gen.token_ids]),
                completion_len=len(gen.token_ids),
                finish_reason=gen.finish_reason,
                checkpoint_id=gen.checkpoint_id,
                tokenizer=gen.model.tokenizer_sha256,
                parent=parent,
            )
        )
