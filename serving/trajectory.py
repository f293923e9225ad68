"""Which agent run a chat call belongs to, and which earlier answer it extends (pure).

An agent run is many calls: each sends the history so far, the last answer of the gateway's
among it, then what happened since (tool results, a user's reply). One interaction is every
call of one run. A call joins an interaction when it carries its ``X-Rtrl-Interaction-Id``, or,
without one, when its history extends an answer this gateway gave: the messages that answer
was asked with, then the answer, then new messages. The answer is recognised by what only it
can carry: the ids of its tool calls (the gateway's own, random), or, for an answer without
calls, its text under the same user key and the same history. Never by the user turns alone:
two users who typed the same thing are not one run.

Each call records its parent (the answer it extends), so an interaction's calls form a tree,
and a segment: the calls that extend one another token for token. A call whose history does
not extend its parent's (the agent summarised or dropped turns) starts a new segment of the
same interaction. A match that is not unique (a retried call whose two answers are the same
short text, a fork) starts a new interaction, counted: a wrong join would train on another
run's tokens. Answers are their organisation's (the API key's): a call joins only its own
organisation's answers, and runs are numbered per organisation, as two organisations may send
the same interaction id.

The memory is this process's: answers are kept for ``ttl_s`` after they were given and at most
``max_answers`` of them (least recently used first out); each keeps its own new tokens (the
environment's and the model's) and a pointer to its parent, so a run of n calls holds each
token once. Replicas behind a load balancer remember separately: route an agent's calls to
one replica (by user key), or send the interaction header.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from array import array
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

OUTCOMES = ("new", "extends", "new_segment", "unmatched", "ambiguous")


def _canonical_arguments(arguments: Any) -> Any:
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except ValueError:
            return arguments
    return arguments


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if p.get("type") == "text")
    return "" if content is None else str(content)


def _calls(message: Mapping[str, Any]) -> tuple[tuple[str, str, str], ...]:
    """An assistant message's calls as (id, name, arguments parsed and re-serialised)."""
    return tuple(
        (
            str(c.get("id")),
            str(c["function"]["name"]),
            json.dumps(_canonical_arguments(c["function"].get("arguments")), sort_keys=True),
        )
        for c in message.get("tool_calls") or ()
    )


def digest(messages: Sequence[Mapping[str, Any]], tools: Any = None) -> str:
    """What a history says, independent of how a client serialised it: roles, texts, calls
    (arguments parsed), the calls results answer; and the tools offered.

    >>> a = [{"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type":
    ...       "function", "function": {"name": "f", "arguments": '{"x": 1, "y": 2}'}}]}]
    >>> b = [{"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f",
    ...       "arguments": '{"y":2,"x":1}'}}]}]
    >>> digest(a) == digest(b), digest(a) == digest([{"role": "assistant", "content": "x"}])
    (True, False)
    """
    rows = [
        (str(m.get("role")), _text(m.get("content")), _calls(m), str(m.get("tool_call_id") or ""))
        for m in messages
    ]
    body = json.dumps([rows, tools], sort_keys=True, default=str)
    return hashlib.sha256(body.encode()).hexdigest()


def _text_key(scope: str, context: str, content: str) -> str:
    return hashlib.sha256(f"{scope}\0{context}\0{content}".encode()).hexdigest()


@dataclass(eq=False)
class Answer:
    """One answer the gateway gave, as much as extending it needs."""

    call_id: str  # the answer's id (its response id)
    interaction_id: str
    scope: str  # the user key it was given under ("" when none)
    segment: int
    context: str  # digest of the history it was asked with
    content: str  # its text, as sent to the client (before any calls)
    calls: tuple[tuple[str, str, str], ...]  # (id, name, arguments) as sent
    new_ids: array  # (int32) tokens after the parent's sequence: environment's, then the model's
    completion_len: int  # how many of new_ids are the model's (the last ones)
    finish_reason: str
    checkpoint_id: str
    tokenizer: str  # sha256 of the tokenizer its ids are in
    parent: Answer | None = None
    org: str = ""  # the organisation it was given to: only its calls can extend it
    used_at: float = 0.0  # when it was given or last extended (the memory's clock)

    def sequence(self) -> list[int]:
        """The whole token sequence up to the end of this answer: every ancestor's new tokens,
        then its own (the next call's prompt starts with it)."""
        chain: list[Answer] = []
        node: Answer | None = self
        while node is not None:
            chain.append(node)
            node = node.parent
        out: list[int] = []
        for node in reversed(chain):
            out.extend(node.new_ids)
        return out

    def completion_ids(self) -> list[int]:
        return list(self.new_ids[len(self.new_ids) - self.completion_len :])


@dataclass(frozen=True)
class Recognition:
    """Where a call belongs: ``interaction_id`` None for a new interaction (the gateway gives
    it an id, and segment 0), ``parent`` the answer it extends token for token (None: its
    prompt is rendered whole), ``outcome`` one of :data:`OUTCOMES`, for counting."""

    interaction_id: str | None
    parent: Answer | None
    segment: int | None  # None: the first of a new interaction
    outcome: str
    new_messages: tuple[Mapping[str, Any], ...] = ()  # after the parent's answer


class AnswerMemory:
    """The answers a gateway gave, found by their calls' ids or by their text. Thread-safe:
    the gateway recognises on its event loop and remembers from a stream's end."""

    def __init__(self, max_answers: int = 50_000, ttl_s: float = 3600.0,
                 clock: Callable[[], float] = time.monotonic) -> None:  # fmt: skip
        self.max_answers, self.ttl_s, self._clock = max_answers, ttl_s, clock
        self._answers: OrderedDict[str, Answer] = OrderedDict()  # call id -> answer, LRU
        self._by_call: dict[str, Answer] = {}  # tool call id -> answer
        self._by_text: dict[str, list[Answer]] = {}  # text key -> answers
        # (organisation, interaction) -> segments begun: two organisations' same id is two runs
        self._segments: OrderedDict[tuple[str, str], int] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._answers)

    def remember(self, answer: Answer) -> None:
        with self._lock:
            answer.used_at = self._clock()
            self._expire()
            self._answers[answer.call_id] = answer
            for call in answer.calls:
                self._by_call[call[0]] = answer
            self._by_text.setdefault(_key_of(answer), []).append(answer)
            while len(self._answers) > self.max_answers:
                self._forget(self._answers.popitem(last=False)[1])

    def new_segment(self, interaction_id: str, org: str = "") -> int:
        """The next segment's number in ``org``'s ``interaction_id`` (0 for its first)."""
        with self._lock:
            n = self._segments.pop((org, interaction_id), 0)
            self._segments[(org, interaction_id)] = n + 1
            while len(self._segments) > self.max_answers:
                self._segments.popitem(last=False)
            return n

    def recognise(self, messages: Sequence[Mapping[str, Any]], tools: Any, scope: str,
                  interaction_id: str | None, org: str = "") -> Recognition:  # fmt: skip
        """Where a call with ``messages`` (as the client sent them) belongs; ``scope``: its
        user key ("" when none), ``interaction_id``: its header's (None when none), ``org``: the
        organisation of its API key, whose answers alone it can extend."""
        last = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=-1)
        if last < 0 or last == len(messages) - 1:
            return self._fresh(interaction_id, "new", org)
        answer_msg = messages[last]
        context = digest(messages[:last], tools)
        calls = _calls(answer_msg)
        content = _text(answer_msg.get("content"))
        with self._lock:
            self._expire()
            if calls:
                found = {id(a): a for c in calls if (a := self._by_call.get(c[0])) is not None}
                candidates = list(found.values())
            else:
                candidates = list(self._by_text.get(_text_key(scope, context, content), ()))
            candidates = [a for a in candidates if a.org == org]
            if interaction_id is not None:
                candidates = [a for a in candidates if a.interaction_id == interaction_id]
        if len(candidates) > 1:
            return self._fresh(interaction_id, "ambiguous", org)
        if not candidates:
            return self._fresh(interaction_id, "unmatched", org)
        (parent,) = candidates
        if (
            parent.context != context
            or calls != parent.calls
            or content not in (parent.content, "")
        ):
            segment = self.new_segment(parent.interaction_id, org)
            return Recognition(parent.interaction_id, None, segment, "new_segment")
        with self._lock:
            if parent.call_id in self._answers:
                parent.used_at = self._clock()
                self._answers.move_to_end(parent.call_id)
        return Recognition(
            parent.interaction_id, parent, parent.segment, "extends", tuple(messages[last + 1 :])
        )

    def _fresh(self, interaction_id: str | None, outcome: str, org: str) -> Recognition:
        if interaction_id is None:
            return Recognition(None, None, None, outcome)
        return Recognition(interaction_id, None, self.new_segment(interaction_id, org), outcome)

    def _expire(self) -> None:
        horizon = self._clock() - self.ttl_s
        while self._answers:
            oldest = next(iter(self._answers.values()))
            if oldest.used_at >= horizon:
                break
            self._forget(self._answers.popitem(last=False)[1])

    def _forget(self, answer: Answer) -> None:
        for call in answer.calls:
            if self._by_call.get(call[0]) is answer:
                del self._by_call[call[0]]
        key = _key_of(answer)
        kept = [a for a in self._by_text.get(key, ()) if a is not answer]
        if kept:
            self._by_text[key] = kept
        else:
            self._by_text.pop(key, None)


def _key_of(answer: Answer) -> str:
    return _text_key(answer.scope, answer.context, answer.content)
