"""One completion as every backend gives it, and the pure steps from it to what leaves the
gateway: the whole OpenAI response (a stream's chunks: ``stream``; the rollout:
``rollouts.build``).

A backend answers with a :class:`Generation`: the checkpoint that produced it, the prompt and
completion token ids and the behaviour log-probabilities exactly as the model gave them (an
upstream may leave some out: then they are ``None``, never guessed), the text, the finish
reason. The response shows the same ids and log-probabilities to the client; the rollout
carries them to Kafka. Nothing here re-tokenises text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

from models.generation import Alternatives, Generation


@dataclass(frozen=True)
class Shown:
    """What the client asked to see besides the text: ``top`` alternatives per token."""

    logprobs: bool
    token_ids: bool
    top: int = 0


def usage_of(gen: Generation) -> dict[str, Any]:
    """The answer's ``usage``."""
    return _usage(gen)


def text_offsets(pieces: Sequence[str], start: int = 0) -> list[int]:
    """Where each token's text starts in the completion, the first at ``start``.

    >>> text_offsets(["de", "f", " m"], start=3)
    [3, 5, 6]
    """
    return list(accumulate((len(p) for p in pieces[:-1]), initial=start)) if pieces else []


def _usage(gen: Generation) -> dict[str, Any]:
    prompt = len(gen.prompt_ids or ())
    completion = len(gen.token_ids or ())
    usage: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if gen.cached_tokens is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": gen.cached_tokens}
    return usage


def token_entries(pieces: Sequence[str], logprobs: Sequence[float],
                  tops: Sequence[Alternatives] | None, n: int) -> list[dict[str, Any]]:  # fmt: skip
    """A chat answer's ``logprobs.content``: each token with its ``n`` likeliest alternatives.

    >>> token_entries(["a"], [-0.1], [(("a", -0.1), ("b", -2.5))], 1)[0]["top_logprobs"]
    [{'token': 'a', 'logprob': -0.1, 'bytes': [97]}]
    """
    return [
        {
            "token": piece,
            "logprob": lp,
            "bytes": list(piece.encode()),
            "top_logprobs": [
                {"token": t, "logprob": a, "bytes": list(t.encode())}
                for t, a in (tops[i][:n] if n and tops is not None else ())
            ],
        }
        for i, (piece, lp) in enumerate(zip(pieces, logprobs, strict=True))
    ]


def completion_logprobs(pieces: Sequence[str], logprobs: Sequence[float],
                        tops: Sequence[Alternatives] | None, n: int,
                        start: int = 0) -> dict[str, Any]:  # fmt: skip
    """A (legacy) completion's ``logprobs``; ``start``: where the first piece is in the text.

    >>> body = completion_logprobs(["a", "b"], [-0.1, -0.2], [(("a", -0.1),), (("b", -0.2),)], 5)
    >>> body["top_logprobs"], body["text_offset"]
    ([{'a': -0.1}, {'b': -0.2}], [0, 1])
    """
    body: dict[str, Any] = {"tokens": list(pieces), "token_logprobs": list(logprobs)}
    if n and tops is not None:
        body["top_logprobs"] = [dict(alts[:n]) for alts in tops]
    body["text_offset"] = text_offsets(pieces, start)
    return body


# A whole answer is built as the JSON object that ``ChatCompletionResponse`` and
# ``CompletionResponse`` describe (OpenAI's required keys always there, null when empty; vLLM's
# extensions only when asked), not as those models: on a gateway in front of a fast backend,
# building and dumping the models was a tenth of its own CPU per request. The tests check each
# object against OpenAI's published schema (``tests/serving``).
def chat_response(
    gen: Generation, request_id: str, created: int, model: str, shown: Shown
) -> dict[str, Any]:
    """The body of a whole chat completion.

    >>> gen = Generation("c1", None, (1, 2), (3,), (-0.5,), "hi", "stop", ("hi",))
    >>> body = chat_response(gen, "chatcmpl-1", 7, "c1", Shown(logprobs=True, token_ids=True))
    >>> body["choices"][0]["logprobs"]["content"], body["prompt_token_ids"]
    ([{'token': 'hi', 'logprob': -0.5, 'bytes': [104, 105], 'top_logprobs': []}], [1, 2])
    """
    choice: dict[str, Any] = {
        "index": 0,
        "message": {"role": "assistant", "content": gen.text, "refusal": None},
        "logprobs": None,
        "finish_reason": gen.finish_reason,
    }
    if shown.logprobs and gen.logprobs is not None:
        pieces = gen.pieces or tuple("" for _ in gen.logprobs)
        choice["logprobs"] = {
            "content": token_entries(pieces, gen.logprobs, gen.top_logprobs, shown.top),
            "refusal": None,
        }
    if shown.token_ids and gen.token_ids is not None:
        choice["token_ids"] = list(gen.token_ids)
    body: dict[str, Any] = {
        "id": request_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [choice],
        "usage": _usage(gen),
    }
    if shown.token_ids and gen.prompt_ids:
        body["prompt_token_ids"] = list(gen.prompt_ids)
    return body


def completion_response(
    gen: Generation, request_id: str, created: int, model: str, shown: Shown
) -> dict[str, Any]:
    """The body of a whole (legacy) completion."""
    choice: dict[str, Any] = {
        "index": 0,
        "text": gen.text,
        "logprobs": None,
        "finish_reason": gen.finish_reason,
    }
    if shown.logprobs and gen.logprobs is not None:
        pieces = gen.pieces or tuple("" for _ in gen.logprobs)
        choice["logprobs"] = completion_logprobs(pieces, gen.logprobs, gen.top_logprobs, shown.top)
    if shown.token_ids and gen.prompt_ids:
        choice["prompt_token_ids"] = list(gen.prompt_ids)
    if shown.token_ids and gen.token_ids:
        choice["token_ids"] = list(gen.token_ids)
    return {
        "id": request_id,
        "object": "text_completion",
        "created": created,
        "model": model,
        "choices": [choice],
        "usage": _usage(gen),
    }


def text_pieces(decode, token_ids: tuple[int, ...], text: str) -> tuple[str, ...]:  # noqa: ANN001
    """The text each token adds, so that a stream shows text as it would appear: a token that
    ends inside a multi-byte character adds nothing until the character is whole, and the pieces
    joined are exactly ``text`` (which a stop string may have cut short).

    >>> text_pieces(lambda ids: "".join("ab"[i] for i in ids), (0, 1, 1), "ab")
    ('a', 'b', '')
    """
    pieces: list[str] = []
    sent = 0
    for i in range(len(token_ids)):
        if i == len(token_ids) - 1:
            pieces.append(text[sent:])
            break
        prefix = decode(token_ids[: i + 1])
        common = sent  # what was sent is a prefix of both already
        limit = min(len(prefix), len(text))
        while common < limit and prefix[common] == text[common]:
            common += 1
        if prefix.endswith("\ufffd"):  # an unfinished character decodes to the replacement
            common = min(common, len(prefix) - 1)
        end = max(sent, common)
        pieces.append(text[sent:end])
        sent = end
    return tuple(pieces)
