"""A completion as server-sent events, built as its tokens come: the pure steps from drawn tokens
to stream chunks.

A stream is a head (chat: the assistant's role), one chunk per :class:`Step`, and a tail with
the finish reason (null on every chunk before), then, when ``stream_options.include_usage`` asks,
a chunk with the usage and no choices (every other chunk of a chat then has ``"usage": null``,
as OpenAI's schema of a chat chunk has it; a completion chunk's schema has no null usage);
without it a completion's tail carries the usage. A step is one token with the text it adds
(or, when an upstream gave no text per token, all tokens at once). The local backend makes a
step of each token as the batch draws it (:class:`Increments` decides the text it may show
yet); an upstream's answer, asked whole, is cut into steps after (:func:`steps_of`). Either
way the text of the steps and the tail joined is exactly the completion's text, and the
tokens and log-probabilities of the steps are exactly the rollout's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import orjson

from models.generation import Alternatives, Generation
from serving.generation import (
    Shown,
    completion_logprobs,
    token_entries,
    usage_of,
)

DONE = b"data: [DONE]\n\n"


@dataclass(frozen=True)
class Step:
    text: str  # what this step adds to the text shown
    token_ids: tuple[int, ...]
    logprobs: tuple[float, ...] | None
    pieces: tuple[str, ...]  # each token's text, for its log-probability entry
    prompt_ids: tuple[int, ...] | None = None  # on a completion's first step
    top_logprobs: tuple[Alternatives, ...] | None = None  # each token's, when asked for


def steps_of(gen: Generation) -> list[Step]:
    """The steps of a whole generation: one per token when the text of each is known, else one
    for all.

    >>> [s.text for s in steps_of(Generation("c", None, (1,), (5, 6), None, "ab", "stop",
    ...                                      ("a", "b")))]
    ['a', 'b']
    >>> steps_of(Generation("c", None, (1,), (5, 6), None, "ab", "stop"))[0].token_ids
    (5, 6)
    """
    ids, tops = gen.token_ids or (), gen.top_logprobs
    if gen.pieces is not None and len(gen.pieces) == len(ids):
        steps = [
            Step(
                piece,
                (ids[i],),
                None if gen.logprobs is None else gen.logprobs[i : i + 1],
                (piece,),
                None,
                None if tops is None else tops[i : i + 1],
            )
            for i, piece in enumerate(gen.pieces)
        ]
    else:
        steps = [Step(gen.text, ids, gen.logprobs, tuple("" for _ in ids), None, tops)]
    if steps:
        steps[0] = replace(steps[0], prompt_ids=gen.prompt_ids)
    return steps


def rest_of(text: str, sent: str) -> str:
    """What the tail adds to what the steps sent: the end of ``text`` that they held back.

    >>> rest_of("abc\\ufffd", "abc"), rest_of("ab", "ab")
    ('\\ufffd', '')
    """
    return text[len(sent) :] if text.startswith(sent) else ""


class Increments:
    """The text each newly drawn token adds, while the completion is still being drawn.

    Only text that cannot change is shown: a token ending inside a multi-byte character adds
    nothing until the character is whole, nothing from a stop string on is ever shown, and the
    end of the text that could be the start of a stop string waits for the next token. So the
    text sent so far is always a prefix of the completion's final text, and the tail sends the
    rest (:func:`rest_of`).

    >>> inc = Increments(lambda ids: "".join("ab#"[i] for i in ids), stops=("#b",))
    >>> [inc.push(t) for t in (0, 1, 2, 0, 2, 1)], inc.sent
    (['a', 'b', '', '#a', '', ''], 'ab#a')
    """

    def __init__(self, decode: Callable[[Sequence[int]], str], stops: Sequence[str] = ()) -> None:
        self._decode = decode
        self._stops = tuple(s for s in stops if s)
        self._ids: list[int] = []
        self.sent = ""

    def push(self, token_id: int) -> str:
        self._ids.append(token_id)
        text = self._decode(self._ids)
        cut = [text.find(s) for s in self._stops if s in text]
        if cut:
            text = text[: min(cut)]
        else:
            text = text[: len(text) - _partial_stop(text, self._stops)]
        while text.endswith("\ufffd"):  # an unfinished character decodes to the replacement
            text = text[:-1]
        if len(text) <= len(self.sent) or not text.startswith(self.sent):
            return ""
        piece = text[len(self.sent) :]
        self.sent = text
        return piece


def _partial_stop(text: str, stops: Sequence[str]) -> int:
    """Length of the longest end of ``text`` that begins some stop string.

    >>> _partial_stop("ab#", ("#b",)), _partial_stop("ab", ("#b",))
    (1, 0)
    """
    longest = 0
    for stop in stops:
        for n in range(min(len(stop) - 1, len(text)), longest, -1):
            if text.endswith(stop[:n]):
                longest = n
                break
    return longest


# --- chunks --------------------------------------------------------------------------------
# Built as the JSON objects of OpenAI's chunk schemas (``protocol.ChatCompletionChunk`` and
# ``CompletionResponse`` describe them), as whole answers are (``generation``).
def sse(chunk: dict[str, Any], null_usage: bool = False) -> bytes:
    """One server-sent event; ``null_usage``: the chunk says ``"usage": null`` (a chat stream
    that ends with a usage chunk)."""
    if null_usage:
        chunk.setdefault("usage", None)
    return b"data: " + orjson.dumps(chunk) + b"\n\n"


def _chunk(kind: str, request_id: str, created: int, model: str,
           choices: list[dict[str, Any]]) -> dict[str, Any]:  # fmt: skip
    return {"id": request_id, "object": kind, "created": created, "model": model,
            "choices": choices}  # fmt: skip


def _chat_chunk(request_id: str, created: int, model: str, delta: dict[str, Any],
                logprobs: dict[str, Any] | None = None,
                finish_reason: str | None = None) -> dict[str, Any]:  # fmt: skip
    choice = {"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish_reason}
    return _chunk("chat.completion.chunk", request_id, created, model, [choice])


def chat_delta(request_id: str, created: int, model: str, delta: dict[str, Any],
               finish_reason: str | None = None) -> dict[str, Any]:  # fmt: skip
    """A chunk of ``delta`` alone (a piece of text, a tool call), or the finish chunk."""
    return _chat_chunk(request_id, created, model, delta, None, finish_reason)


def chat_head(request_id: str, created: int, model: str, shown: Shown,
              prompt_ids: tuple[int, ...] | None) -> dict[str, Any]:  # fmt: skip
    """The first chunk: the assistant's role (and the prompt's ids when asked)."""
    chunk = _chat_chunk(request_id, created, model, {"role": "assistant", "content": ""})
    if shown.token_ids and prompt_ids:
        chunk["prompt_token_ids"] = list(prompt_ids)
    return chunk


def chat_step(step: Step, request_id: str, created: int, model: str,
              shown: Shown) -> dict[str, Any]:  # fmt: skip
    logprobs = None
    if shown.logprobs and step.logprobs is not None:
        content = token_entries(step.pieces, step.logprobs, step.top_logprobs, shown.top)
        logprobs = {"content": content, "refusal": None}
    chunk = _chat_chunk(request_id, created, model, {"content": step.text}, logprobs)
    if shown.token_ids:
        chunk["choices"][0]["token_ids"] = list(step.token_ids)
    return chunk


def chat_tail(gen: Generation, rest: str, request_id: str, created: int,
              model: str) -> Iterator[dict[str, Any]]:  # fmt: skip
    """What the steps held back (if anything), then the finish reason."""
    if rest:
        yield chat_step(Step(rest, (), None, ()), request_id, created, model, Shown(False, False))
    yield _chat_chunk(request_id, created, model, {}, None, gen.finish_reason)


def completion_step(step: Step, offset: int, request_id: str, created: int, model: str,
                    shown: Shown) -> dict[str, Any]:  # fmt: skip
    """A streamed completion's chunk; ``offset``: where the step's text starts in the text."""
    choice: dict[str, Any] = {"index": 0, "text": step.text, "logprobs": None,
                              "finish_reason": None}  # fmt: skip
    if shown.logprobs and step.logprobs is not None:
        choice["logprobs"] = completion_logprobs(
            step.pieces, step.logprobs, step.top_logprobs, shown.top, offset
        )
    if shown.token_ids and step.prompt_ids:
        choice["prompt_token_ids"] = list(step.prompt_ids)
    if shown.token_ids:
        choice["token_ids"] = list(step.token_ids)
    return _chunk("text_completion", request_id, created, model, [choice])


def completion_tail(gen: Generation, rest: str, request_id: str, created: int, model: str,
                    with_usage: bool = False) -> dict[str, Any]:  # fmt: skip
    """The last chunk: what the steps held back and the finish reason, and the usage unless
    a usage chunk follows."""
    choice = {"index": 0, "text": rest, "logprobs": None, "finish_reason": gen.finish_reason}
    chunk = _chunk("text_completion", request_id, created, model, [choice])
    if not with_usage:
        chunk["usage"] = usage_of(gen)
    return chunk


def usage_chunk(gen: Generation, request_id: str, created: int, model: str,
                chat: bool) -> dict[str, Any]:  # fmt: skip
    """``stream_options.include_usage``'s last chunk: no choices, the whole stream's usage."""
    kind = "chat.completion.chunk" if chat else "text_completion"
    return {**_chunk(kind, request_id, created, model, []), "usage": usage_of(gen)}
