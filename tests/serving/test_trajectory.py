"""Which agent run a call belongs to (``serving.trajectory``): joined by the gateway's tool-call
ids or by the answer's text under the same user key and history, never by the user turns
alone; an ambiguous match starts a new interaction; a history that does not extend starts a
new segment; memory bounded in count and time, each token held once."""

from __future__ import annotations

import json
from array import array
from typing import Any

from serving.trajectory import Answer, AnswerMemory, digest

ASK: list[dict[str, Any]] = [{"role": "user", "content": "fix the test"}]


def _call(call_id: str, name: str = "read_file", args: str = '{"path": "a.py"}') -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


def _answer(memory: AnswerMemory, call_id: str, history: list[dict[str, Any]], content: str = "",
            calls: tuple[tuple[str, str, str], ...] = (), scope: str = "u1",
            interaction: str = "i1", parent: Answer | None = None,
            new_ids: tuple[int, ...] = (1, 2, 3)) -> Answer:  # fmt: skip
    answer = Answer(
        call_id=call_id,
        interaction_id=interaction,
        scope=scope,
        segment=0,
        context=digest(history),
        content=content,
        calls=calls,
        new_ids=array("i", new_ids),
        completion_len=1,
        finish_reason="stop",
        checkpoint_id="c0",
        tokenizer="t" * 64,
        parent=parent,
    )
    if parent is None:
        memory.new_segment(interaction)  # as the gateway numbers a run's first segment
    memory.remember(answer)
    return answer


def _canonical(name: str, args: str) -> str:
    return json.dumps(json.loads(args), sort_keys=True)


def test_a_call_extends_the_answer_whose_tool_calls_it_sends_back() -> None:
    memory = AnswerMemory()
    calls = (("call_1", "read_file", _canonical("read_file", '{"path": "a.py"}')),)
    first = _answer(memory, "r1", ASK, calls=calls)
    history: list[Any] = [*ASK, {"role": "assistant", "content": None,
                      "tool_calls": [_call("call_1", args='{"path":"a.py"}')]},
               {"role": "tool", "tool_call_id": "call_1", "content": "..."}]  # fmt: skip
    seen = memory.recognise(history, None, "someone-else", None)  # the ids alone suffice
    assert (seen.outcome, seen.parent, seen.interaction_id) == ("extends", first, "i1")
    assert [m["role"] for m in seen.new_messages] == ["tool"]


def test_a_text_answer_is_found_only_under_the_same_user_key() -> None:
    memory = AnswerMemory()
    first = _answer(memory, "r1", ASK, content="Done.")
    history: list[Any] = [
        *ASK,
        {"role": "assistant", "content": "Done."},
        {"role": "user", "content": "?"},
    ]
    assert memory.recognise(history, None, "u1", None).parent is first
    other = memory.recognise(history, None, "u2", None)  # same words, another user
    assert (other.outcome, other.parent, other.interaction_id) == ("unmatched", None, None)


def test_two_remembered_answers_that_fit_start_a_new_interaction() -> None:
    memory = AnswerMemory()
    _answer(memory, "r1", ASK, content="OK")
    _answer(memory, "r2", ASK, content="OK", interaction="i2")  # a retried call, same text
    history: list[Any] = [
        *ASK,
        {"role": "assistant", "content": "OK"},
        {"role": "user", "content": "go"},
    ]
    seen = memory.recognise(history, None, "u1", None)
    assert (seen.outcome, seen.parent, seen.interaction_id) == ("ambiguous", None, None)
    # the interaction header decides between them
    assert memory.recognise(history, None, "u1", "i2").parent is not None


def test_a_history_that_does_not_extend_starts_a_new_segment_of_the_same_run() -> None:
    memory = AnswerMemory()
    calls = (("call_1", "read_file", _canonical("read_file", '{"path": "a.py"}')),)
    _answer(memory, "r1", ASK, calls=calls)
    summarised: list[Any] = [{"role": "user", "content": "fix the test (summary: a.py read)"},
                  {"role": "assistant", "tool_calls": [_call("call_1")]},
                  {"role": "tool", "tool_call_id": "call_1", "content": "..."}]  # fmt: skip
    seen = memory.recognise(summarised, None, "u1", None)
    assert (seen.outcome, seen.parent, seen.interaction_id) == ("new_segment", None, "i1")
    assert seen.segment == 1  # the first call's was 0
    again = memory.recognise(summarised, None, "u1", None)
    assert again.segment == 2  # each new segment is numbered anew


def test_other_arguments_under_the_same_id_do_not_extend() -> None:
    memory = AnswerMemory()
    _answer(memory, "r1", ASK, calls=(("call_1", "read_file", '{"path": "a.py"}'),))
    call = _call("call_1", args='{"path": "b.py"}')
    edited: list[Any] = [*ASK, {"role": "assistant", "tool_calls": [call]},
                         {"role": "tool", "tool_call_id": "call_1", "content": "..."}]  # fmt: skip
    assert memory.recognise(edited, None, "u1", None).outcome == "new_segment"


def test_memory_is_bounded_in_count_and_time_and_holds_each_token_once() -> None:
    now = [0.0]
    memory = AnswerMemory(max_answers=3, ttl_s=10.0, clock=lambda: now[0])
    parent = _answer(memory, "r0", ASK, content="a", new_ids=(1, 2))
    child = _answer(memory, "r1", ASK, content="b", parent=parent, new_ids=(3, 4))
    assert child.sequence() == [1, 2, 3, 4] and child.completion_ids() == [4]
    for i in range(2, 6):
        _answer(memory, f"r{i}", ASK, content=str(i))
    assert len(memory) == 3  # the least recently used went first
    now[0] = 11.0
    _answer(memory, "late", ASK, content="z")
    assert len(memory) == 1  # the rest expired


def test_the_first_call_of_a_run_is_new() -> None:
    memory = AnswerMemory()
    assert memory.recognise(ASK, None, "u1", None).outcome == "new"
    assert memory.recognise(ASK, None, "u1", "i9").segment == 0
    assert memory.recognise(ASK, None, "u1", "i9").segment == 1


def test_another_organisation_cannot_extend_an_answer_by_its_call_ids() -> None:
    """The call ids alone join a run, but only within the organisation of the API key: a
    foreign organisation sending them back starts a run of its own, never spliced onto
    another tenant's tokens."""
    memory = AnswerMemory()
    calls = (("call_1", "read_file", _canonical("read_file", '{"path": "a.py"}')),)
    first = _answer(memory, "r1", ASK, calls=calls)
    first.org = "acme"
    history: list[Any] = [*ASK, {"role": "assistant", "content": None,
                      "tool_calls": [_call("call_1", args='{"path":"a.py"}')]},
               {"role": "tool", "tool_call_id": "call_1", "content": "..."}]  # fmt: skip
    foreign = memory.recognise(history, None, "u1", None, org="globex")
    assert (foreign.outcome, foreign.parent, foreign.interaction_id) == ("unmatched", None, None)
    assert memory.recognise(history, None, "u1", None, org="acme").parent is first


def test_two_organisations_same_interaction_id_number_their_segments_apart() -> None:
    memory = AnswerMemory()
    assert memory.recognise(ASK, None, "u1", "i9", org="acme").segment == 0
    assert memory.recognise(ASK, None, "u1", "i9", org="globex").segment == 0
    assert memory.recognise(ASK, None, "u1", "i9", org="acme").segment == 1
