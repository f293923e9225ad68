"""The agent harness: a response's text becomes edits, tool calls, questions and sub-agents, and
their telemetry is valid events-v1 that the reward function counts as the behaviour flags say."""

from __future__ import annotations

import orjson
import pytest
import torch

from agent.behaviour import BEHAVIOUR_METRICS, HarnessBehaviour, text_behaviour
from agent.harness import (
    MALFORMED_TOOL,
    UNKNOWN_TOOL,
    AgentEvent,
    CallProblem,
    Harness,
    ToolSpec,
)
from agent.telemetry import envelope
from ingest.contract import Origin, parse_event
from models.policy import Completion
from models.sampling import SamplingParams
from release.candidate_evals import compare_behaviour
from rewards.config import RewardConfig
from rewards.function import compute_record

HARNESS = Harness()
EDIT = "Here you go:\n```python\ndef reverse(xs):\n\n    return xs[::-1]\n```\n"
SEARCH = '{"tool": "search", "args": {"query": "slugify"}}'

TEXTS = {
    "edit": EDIT,
    "broken call": '{"tool": "search", "args": {"query": "x"}',
    "unknown tool": '```tool\n{"tool": "deploy_to_prod", "args": {}}\n```',
    "known tool": SEARCH,
    "question": "Should the slug keep unicode letters?",
    "question and edit": "Is this what you meant?\n" + EDIT,
    "sub-agent and edit": '{"tool": "subagent", "args": {"task": "tests"}}\n' + EDIT,
    "sub-agent alone": '{"tool": "subagent", "args": {"task": "tests"}}',
    "nothing": "I cannot help with that.",
    "diff": "```diff\n--- a/x.py\n+++ b/x.py\n-a = 1\n+a = 2\n+b = 3\n```",
}


def _types(text: str) -> list[str]:
    return [e.type for e in HARNESS.events(HARNESS.read(text), latency_ms=1, output_tokens=1)]


def test_a_fenced_block_is_an_edit_with_its_line_counts():
    turn = HARNESS.read(EDIT)
    (edit,) = turn.edits
    assert (edit.edit_id, edit.language, edit.lines_added, edit.lines_removed) == (
        "e1",
        "python",
        2,  # the blank line is no added line
        0,
    )
    assert "return xs[::-1]" in turn.code()
    assert turn.tool_calls == () and not turn.clarifying


def test_the_code_to_grade_is_every_python_edit_in_order():
    turn = HARNESS.read("```python\nA = 1\n```\n```bash\npip install x\n```\n```\nB = 2\n```")
    assert len(turn.edits) == 3  # a shell block is still a proposed edit
    assert turn.code() == "A = 1\n\n\nB = 2\n"


def test_a_diff_block_counts_its_added_and_removed_lines():
    (edit,) = HARNESS.read(TEXTS["diff"]).edits
    assert (edit.lines_added, edit.lines_removed) == (2, 1)


def test_edits_are_numbered_in_text_order_and_an_empty_block_is_none():
    turn = HARNESS.read("```py\na\n```\n```\n\n```\n" + SEARCH + "\n~~~~\nb\nc\n~~~~")
    assert [(e.edit_id, e.lines_added) for e in turn.edits] == [("e1", 1), ("e2", 2)]
    assert [type(a).__name__ for a in turn.actions] == ["Edit", "ToolCall", "Edit"]


def test_an_unclosed_block_runs_to_the_end():
    (edit,) = HARNESS.read("```python\ndef f():\n    return 1").edits
    assert edit.lines_added == 2


@pytest.mark.parametrize(
    "text",
    [
        '{"tool": "search", "args": {"query": "x"}',  # bare, unbalanced
        '```tool\n{"tool": "search", "args": {"query": "x"},}\n```',  # trailing comma
        "```tool\nsearch(query='x')\n```",  # not JSON at all
        '```tool\n["search", {"query": "x"}]\n```',  # JSON, not the call's shape
        '```tool\n{"tool": "search", "args": "x"}\n```',  # args not an object
        '```tool\n{"tool": "search", "args": {"query": "x"}, "why": "y"}\n```',  # extra key
    ],
)
def test_a_call_that_does_not_parse_is_an_invalid_tool_call(text):
    (call,) = HARNESS.read(text).tool_calls
    assert not call.valid and call.problem == CallProblem.malformed
    assert call.tool in ("search", MALFORMED_TOOL)
    assert HARNESS.read(text).edits == ()
    events = HARNESS.events(HARNESS.read(text), latency_ms=1, output_tokens=1)
    assert events[0] == AgentEvent("agent.tool_call", {"tool": call.tool, "valid": False})


def test_a_malformed_call_names_only_a_known_tool():
    (known,) = HARNESS.read('{"tool": "search", "args": {').tool_calls
    (other,) = HARNESS.read('{"tool": "rm -rf /home", "args": {').tool_calls
    assert (known.tool, other.tool) == ("search", MALFORMED_TOOL)  # the model's text stays out


def test_an_unknown_tool_is_an_invalid_call_reported_without_its_name():
    (call,) = HARNESS.read(TEXTS["unknown tool"]).tool_calls
    assert (call.tool, call.valid, call.problem) == (UNKNOWN_TOOL, False, CallProblem.unknown_tool)


def test_a_known_well_formed_call_is_valid_fenced_or_bare():
    for text in (SEARCH, f"```tool\n{SEARCH}\n```", f"```json\n{SEARCH}\n```"):
        (call,) = HARNESS.read(text).tool_calls
        assert (call.tool, call.valid, dict(call.args)) == ("search", True, {"query": "slugify"})
        assert HARNESS.read(text).edits == ()  # a tool call is not an edit


def test_a_bare_call_may_span_lines_and_prose_after_it_is_read():
    turn = HARNESS.read('{"tool": "search",\n  "args": {"query": "x"}} Shall I go on?\nok')
    assert [c.valid for c in turn.tool_calls] == [True] and turn.asked


def test_a_known_tool_without_its_required_arguments_is_invalid():
    (call,) = HARNESS.read('{"tool": "read_file", "args": {}}').tool_calls
    assert (call.tool, call.problem) == ("read_file", CallProblem.missing_args)
    (ok,) = HARNESS.read('{"tool": "run_tests"}').tool_calls  # args may be left out
    assert ok.valid


def test_a_product_names_its_own_tools():
    harness = Harness(tools=(ToolSpec("deploy_to_prod", ("env",)),))
    (call,) = harness.read(
        '```tool\n{"tool": "deploy_to_prod", "args": {"env": "dev"}}\n```'
    ).tool_calls
    assert call.valid
    (search,) = harness.read(SEARCH).tool_calls
    assert search.tool == UNKNOWN_TOOL
    with pytest.raises(ValueError):
        Harness(tools=(ToolSpec("unknown"),))


def test_a_question_without_an_edit_is_a_clarifying_question():
    assert _types(TEXTS["question"]) == ["agent.clarifying_question", "interaction.completed"]
    assert HARNESS.read(SEARCH + "\nWhich file do you mean?").clarifying  # a call is no edit


def test_a_question_with_an_edit_is_not_a_clarifying_question():
    turn = HARNESS.read(TEXTS["question and edit"])
    assert turn.asked and not turn.clarifying
    assert "agent.clarifying_question" not in _types(TEXTS["question and edit"])


@pytest.mark.parametrize(
    "text",
    [
        "```python\nx = input('Name?')\n```",  # in code
        "Use `re.sub(r'a?b', ...)` here.",  # in inline code
        "See https://example.com/?q=slug for details.",  # not ending a sentence
    ],
)
def test_a_question_mark_in_code_or_mid_word_is_no_question(text):
    assert not HARNESS.read(text).asked


def test_sub_agents_contribute_only_when_the_turn_ends_in_an_edit():
    used = HARNESS.events(HARNESS.read(TEXTS["sub-agent and edit"]), latency_ms=1, output_tokens=1)
    unused = HARNESS.events(HARNESS.read(TEXTS["sub-agent alone"]), latency_ms=1, output_tokens=1)
    assert (
        AgentEvent("agent.subagent_finished", {"subagent_id": "sa1", "contributed": True}) in used
    )
    assert AgentEvent("agent.subagent_finished", {"subagent_id": "sa1", "contributed": False}) in (
        unused
    )
    invalid = HARNESS.read('{"tool": "subagent", "args": {}}')
    assert invalid.subagents == ()  # an invalid call starts no sub-agent


def test_interaction_completed_carries_the_measured_latency_and_tokens_last():
    events = HARNESS.events(HARNESS.read(EDIT), latency_ms=1234, output_tokens=56)
    assert events[-1] == AgentEvent(
        "interaction.completed", {"latency_ms": 1234, "output_tokens": 56}
    )
    with pytest.raises(ValueError):
        HARNESS.events(HARNESS.read(EDIT), latency_ms=-1, output_tokens=0)


@pytest.mark.parametrize("name", sorted(TEXTS))
def test_every_event_is_valid_events_v1_and_the_reward_counts_what_the_flags_say(name):
    turn = HARNESS.read(TEXTS[name])
    built = envelope(
        HARNESS.events(turn, latency_ms=900, output_tokens=40),
        interaction_id="i-harness",
        session_id="s-1",
        user_id="u-1",
        org_id="acme",
        checkpoint_id="ck-1",
        ts="2026-12-01T10:00:00Z",
        experiment={"name": "exp", "arm": "b"},
    )
    for event in built:  # through the collector's own parser, bytes and all
        assert parse_event(orjson.dumps(event), origin=Origin.client) == event
    record = compute_record(
        [{**e, "received_at": e["ts"]} for e in built], RewardConfig()
    )  # as the stream would, once the collector stamped them
    flags = text_behaviour(TEXTS[name])
    assert set(flags) == set(BEHAVIOUR_METRICS)
    assert flags["edit_rate"] == (record.n_edits >= 1)
    assert flags["invalid_tool_call_rate"] == (record.n_invalid_tool_calls >= 1)
    assert flags["clarifying_rate"] == (record.n_clarifying >= 1)
    assert flags["subagent_rate"] == (record.n_subagents >= 1)


def test_the_flags_of_each_kind_of_response():
    assert text_behaviour(EDIT) == {
        "invalid_tool_call_rate": False,
        "edit_rate": True,
        "clarifying_rate": False,
        "subagent_rate": False,
    }
    assert text_behaviour(TEXTS["broken call"])["invalid_tool_call_rate"]
    assert not text_behaviour(TEXTS["known tool"])["invalid_tool_call_rate"]
    assert text_behaviour(TEXTS["question"])["clarifying_rate"]
    assert text_behaviour(TEXTS["sub-agent alone"])["subagent_rate"]


class ScriptedPolicy:
    """A policy whose generations are given texts: compare_behaviour's side of the interface
    (device, sample) with the real Completion type, so the reader is what is tested."""

    device = torch.device("cpu")

    def __init__(self, texts: list[str]) -> None:
        self.texts = texts

    def sample(self, prompts, params, generator):
        return [
            Completion((1,), (0.0,), "stop", self.texts[i % len(self.texts)])
            for i in range(len(prompts))
        ]


def test_harness_behaviour_is_a_reader_for_compare_behaviour():
    parent = ScriptedPolicy([EDIT, EDIT, EDIT, TEXTS["question"]])
    hacked = ScriptedPolicy([TEXTS["broken call"], TEXTS["question"], EDIT, TEXTS["question"]])
    prompts = [[1, 2, 3]] * 50
    params = SamplingParams(max_tokens=8)
    tests = {
        t.metric: t for t in compare_behaviour(parent, hacked, prompts, params, HarnessBehaviour())
    }
    assert set(tests) == set(BEHAVIOUR_METRICS)
    assert tests["invalid_tool_call_rate"].alarm and tests["edit_rate"].alarm
    assert tests["clarifying_rate"].alarm
    assert not tests["subagent_rate"].alarm
    same = compare_behaviour(parent, parent, prompts, params, HarnessBehaviour())
    assert not any(t.alarm for t in same)
