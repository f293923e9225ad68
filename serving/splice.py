"""The prompt of a call that extends an earlier answer, token for token (pure).

An agent sends its history back as text, and text tokenises differently the second time: the
model's own answer, re-tokenised, is not the tokens it sampled (a different split of the same
characters, a stop string's tokens dropped, arguments re-serialised). A learner that trains on
the re-tokenised history trains on tokens the model never produced. So the gateway builds the
next prompt from tokens it already has: the earlier call's prompt and completion ids, exactly,
then the template's text from the end of that answer to the start of the next one, tokenised
on its own. That text (the end-of-turn marker, the tool results, the next header) is rendered
against a fixed context: the answer is a sentinel, so nothing of the client's copy of it, and
nothing before it, can change what follows.

Closing tokens the model did not emit are the environment's: after a stop string or the token
budget, the template's end-of-turn marker is added (no loss on it); after the model's own end
token, it is not added twice.

A model family whose template does not reproduce earlier turns as they were (one that drops
earlier reasoning, or re-serialises arguments) is ``re-render``: its prompt is rendered whole,
and a call whose fresh render does not begin with the earlier sequence starts a new segment.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from models.tool_format import render
from models.tool_template import template_messages

SPLICE, RE_RENDER = "splice", "re-render"
# Families whose chat template re-renders earlier turns differently from how they were sampled;
# every other family splices.
RE_RENDER_FAMILIES: frozenset[str] = frozenset()
SENTINEL = "\u2063rtrl-answer\u2063"  # an invisible separator: no real answer holds it
FIXED_CONTEXT = ({"role": "system", "content": "."}, {"role": "user", "content": "."})


class SpliceError(ValueError):
    """A continuation the template cannot give (``reason`` is counted)."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


def mode_of(family: str) -> str:
    return RE_RENDER if family in RE_RENDER_FAMILIES else SPLICE


@dataclass(frozen=True)
class Splice:
    """What a backend needs to build an extending call's prompt: the earlier sequence (its
    prompt and completion ids), that completion alone, and the messages after it."""

    prefix_ids: tuple[int, ...]
    completion_ids: tuple[int, ...]
    new_messages: tuple[Mapping[str, Any], ...]

    def template_messages(self, own_tools: bool = False) -> list[dict[str, Any]]:
        """The messages whose rendering gives the continuation (:func:`continuation_of`): the
        new ones in the default tool format, or as the model's own template takes them
        (``own_tools``, ``models.tool_template``)."""
        answer = {"role": "assistant", "content": SENTINEL}
        new = list(self.new_messages)
        rendered = template_messages(new) if own_tools else render(new, None)
        return [*FIXED_CONTEXT, answer, *rendered]

    def prompt(self, continuation_ids: Sequence[int]) -> list[int]:
        return [*self.prefix_ids, *environment_ids(continuation_ids, self.completion_ids)]


def continuation_of(rendered: str) -> str:
    """The template's text from the end of an answer's content to the next answer's start, out
    of :meth:`Splice.template_messages` rendered ready for the assistant's turn.

    >>> s = Splice((1,), (1,), ({"role": "tool", "content": "ok"},))
    >>> chatml = "".join(f"<s>{m['role']}\\n{m['content']}</s>\\n" for m in s.template_messages())
    >>> continuation_of(chatml + "<s>assistant\\n")
    '</s>\\n<s>tool\\n<tool_response>\\nok\\n</tool_response></s>\\n<s>assistant\\n'
    """
    if rendered.count(SENTINEL) != 1:
        raise SpliceError("the chat template does not keep an answer as it is", "template")
    return rendered[rendered.index(SENTINEL) + len(SENTINEL) :]


def environment_ids(continuation: Sequence[int], completion: Sequence[int]) -> list[int]:
    """The tokens to add after an answer's ``completion``: the continuation's, less its first
    when the model emitted that token itself (its own end-of-turn).

    >>> environment_ids([2, 10, 11], [7, 8, 2]), environment_ids([2, 10, 11], [7, 8])
    ([10, 11], [2, 10, 11])
    """
    if continuation and completion and completion[-1] == continuation[0]:
        return list(continuation[1:])
    return list(continuation)


def check_length(prompt_len: int, max_tokens: int, context: int | None) -> None:
    """An over-long prompt (spliced or fresh) is refused, never truncated (truncating the
    start of a trajectory would train on a context the model never saw)."""
    if context is not None and prompt_len + max_tokens > context:
        raise SpliceError(
            f"This model's maximum context length is {context} tokens. However, you requested "
            f"{prompt_len + max_tokens} tokens ({prompt_len} in the messages, {max_tokens} in "
            "the completion). Please reduce the length of the messages or completion.",
            "context_length_exceeded",
        )
