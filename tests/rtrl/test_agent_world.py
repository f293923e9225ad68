"""The agent world of `rtrl run --world agent`, from the agent's requests to its reward.

Scripted answers (the official ``openai`` client over a mock transport): each call is carried
out for real in the run's repository (a write changes the file there, a path outside it is
refused and touches nothing), every call the model made is an ``agent.tool_call`` (a broken one
``valid: false``, never dropped), a write that changes the repository an edit, and the hidden
tests decide keep or revert; every event passes the contract and reward spec v1 scores it.

A real `rtrl serve` on the tiny model: the requests of one run, sent with the user's key and no
interaction header, come back under one ``X-Rtrl-Interaction-Id`` (the gateway joined them),
and every event the runs emit passes the contract. The whole `rtrl run --world agent` on the
tiny model lands every run's interaction in the warehouse and writes the round's figures.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import httpx
import httpx2
import pytest

from agent.harness import CallProblem
from agent.sandbox import grade
from agent.tasks import get_task
from agent.tool_agent import NOT_READ, NUDGE, AgentSettings, broken_calls, run_agent
from agent.workspace import MODULE, Refused, Workspace
from ingest.contract import Origin, now_ts, uuid7, validate_event
from rewards.config import RewardConfig
from rewards.function import compute_record
from rtrl.report.summary import read_summary
from rtrl.worlds.agent_world import (
    AgentWorldSettings,
    play_agents,
    react_and_report,
    round_asks,
    tally,
)
from rtrl.worlds.http_users import Later
from tests.support.kafka import free_port_block
from tests.support.rtrl_run import run_rtrl
from tests.support.scripted_gateway import ScriptedGateway, tool_call

TASK = get_task("is_even")


class Contract:
    """An emitter that builds each event as the SDK's ``Client.emit`` does and validates it
    (the SDK drops an invalid event silently: here it fails the test)."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def emit(
        self, event_type: str, interaction_id: str, payload: Any = None, **fields: Any
    ) -> None:
        raw = {"event_id": uuid7(), "type": event_type, "schema_version": 1, "ts": now_ts(),
               "interaction_id": interaction_id, "org_id": "acme", "payload": dict(payload or {}),
               **fields}  # fmt: skip
        self.events.append(validate_event(raw, origin=Origin.client))

    def of(self, interaction_id: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["interaction_id"] == interaction_id]


def reward(events: list[dict[str, Any]]) -> float | None:
    for n, event in enumerate(events):
        event["received_at"] = f"2026-12-01T10:00:{n:02d}.000000Z"
    return compute_record(events, RewardConfig()).reward


# -- the repository ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path", ["/etc/passwd", "../outside.py", "a/../../outside.py", "", "a\0b", "link/x.py", "."]
)
def test_a_path_outside_the_repository_is_refused(tmp_path: Path, path: str) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    with Workspace(TASK, parent=tmp_path) as repo:
        (repo.root / "link").symlink_to(outside)
        with pytest.raises(Refused):
            repo.write(path, "x = 1\n")
        with pytest.raises(Refused):
            repo.read(path)
    assert list(outside.iterdir()) == [] and not (tmp_path / "outside.py").exists()


def test_the_repository_holds_a_stub_and_visible_tests_never_a_hidden_case() -> None:
    with Workspace(TASK) as repo:
        assert "raise NotImplementedError" in repo.read(MODULE)
        tests = repo.read("test_solution.py")
        assert "is_even(6) == True" in tests
        for case in TASK.cases:  # no hidden case's arguments reach the model
            assert f"is_even({case.args[0]!r})" not in tests
        assert repo.run_tests().startswith("0 of 2 tests passed")
        change = repo.write(MODULE, TASK.reference)
        assert change is not None and (change.lines_added, change.lines_removed) == (1, 2)
        assert repo.write(MODULE, TASK.reference) is None  # the same text: no change
        assert repo.run_tests() == "2 of 2 tests passed" and repo.module_changed()
        root = repo.root
    assert not root.exists()


# -- scripted answers -------------------------------------------------------------------------


def text(content: str) -> dict[str, Any]:
    return {"content": content}


def played(script: ScriptedGateway, settings: AgentSettings | None = None,
           parent: Path | None = None) -> tuple:  # fmt: skip
    """Run the agent on the script, react by the rule; the run, the outcome, its events (the
    second look's included, each validated by the contract) and the module after the run."""
    emitter = Contract()
    with Workspace(TASK, parent) as repo:
        run = run_agent(script.client(), repo, "u_agent1", settings or AgentSettings())
        graded = grade(repo.module(), TASK) if repo.module_changed() else None
        module = repo.module()
        later = Later(emitter, delay_s=0)
        outcome = react_and_report(emitter, "u_agent1", TASK, run, graded,
                                   {"user_id": "u_agent1", "session_id": "s1"}, later)  # fmt: skip
        later.drain()
    return run, outcome, emitter.of("i_run1"), module


def kinds(events: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    return [(e["type"], e["payload"].get("tool", e["payload"].get("valid"))) for e in events
            if e["type"] in ("agent.tool_call", "agent.edit_proposed")]  # fmt: skip


def test_a_solving_run_writes_the_file_runs_the_tests_and_is_kept() -> None:
    script = ScriptedGateway(
        tool_call("write_file", path=MODULE, content=TASK.reference),
        tool_call("run_tests"),
        tool_call("finish"),
    )
    run, outcome, events, module = played(script)
    assert module == TASK.reference  # the call was carried out in the repository
    assert run.ended == "finish" and len(script.sent) == 3 and outcome.solved
    assert kinds(events) == [
        ("agent.tool_call", "write_file"),
        ("agent.edit_proposed", None),
        ("agent.tool_call", "run_tests"),
        ("agent.tool_call", "finish"),
    ]
    assert all(e["payload"]["valid"] for e in events if e["type"] == "agent.tool_call")
    assert [e["type"] for e in events][-3:] == ["edit.accepted", "edit.retention", "followup.sent"]
    assert events[0]["type"] == "interaction.started"
    # every request under the user's key and no interaction header: the gateway joins them
    assert {h["x-rtrl-user-id"] for h, _ in script.sent} == {"u_agent1"}
    assert not any("x-rtrl-interaction-id" in h for h, _ in script.sent)
    # the results went back as tool messages answering each call's id
    _, second = script.sent[1]
    sent_call, result = second["messages"][-2], second["messages"][-1]
    assert result == {"role": "tool", "tool_call_id": sent_call["tool_calls"][0]["id"],
                      "content": f"wrote {MODULE} (+1 -2 lines)"}  # fmt: skip
    assert script.sent[2][1]["messages"][-1]["content"] == "2 of 2 tests passed"
    assert reward(events) == pytest.approx(2.0 - 0.1 * run.latency_ms / 10000, abs=1e-3)


def test_a_wrong_edit_is_accepted_then_reverted() -> None:
    wrong = "def is_even(n):\n    return True\n"
    script = ScriptedGateway(
        tool_call("write_file", path=MODULE, content=wrong), text("Done."), text("Done.")
    )
    run, outcome, events, _ = played(script)
    assert run.ended == "answered" and not outcome.solved
    assert outcome.reaction.accepted and outcome.reaction.reverted
    assert [e["type"] for e in events][-3:] == ["edit.accepted", "edit.reverted", "followup.sent"]


def test_a_broken_call_is_reported_invalid_and_the_model_is_asked_again() -> None:
    broken = '<tool_call>\n{"name": "write_file", "arguments": {"path": 1}}'  # cut off
    script = ScriptedGateway(text(broken), text('<tool_call>\n{"name": "is_even"}\n</tool_call>'),
                             text("I cannot."), text("Sorry."))  # fmt: skip
    run, outcome, events, module = played(script)
    assert kinds(events) == [("agent.tool_call", "write_file"), ("agent.tool_call", "unknown")]
    assert not any(e["payload"]["valid"] for e in events if e["type"] == "agent.tool_call")
    # the broken answer went back as it was, with the agent's word; then a nudge after prose
    history = script.sent[1][1]["messages"]
    assert history[-2:] == [{"role": "assistant", "content": broken},
                            {"role": "user", "content": NOT_READ}]  # fmt: skip
    assert script.sent[3][1]["messages"][-1] == {"role": "user", "content": NUDGE}
    assert run.ended == "answered" and len(run.steps) == 4
    assert "NotImplementedError" in module  # nothing was written
    assert outcome.reaction.dissatisfied and outcome.graded is None
    record_reward = reward(events)
    assert record_reward == pytest.approx(-1.0 - 2 * 0.5 - 0.1 * min(run.latency_ms / 1e4, 1))


CUT_CALL = '<tool_call>\n{"name": "write_file", "arguments": {"path": "solution.py", "content": "d'


@pytest.mark.parametrize("cut_text", [CUT_CALL, "<tool"])
def test_a_call_cut_by_its_budget_is_an_invalid_call_and_its_run_goes_on(cut_text: str) -> None:
    """A constrained call that its ``max_tokens`` cut (the gateway returns it as text, finish
    reason ``length``; with a budget under the marker's tokens, not even the marker is whole):
    reported as ``agent.tool_call`` ``valid: false``, its reason ``length`` kept by the harness
    and the step, and the run kept: the model is told and asked again, and the run is scored."""
    cut = {"content": cut_text, "finish_reason": "length"}
    script = ScriptedGateway(cut, tool_call("write_file", path=MODULE, content=TASK.reference),
                             tool_call("finish"))  # fmt: skip
    run, outcome, events, module = played(script, AgentSettings(constrained=True))
    first = run.steps[0]
    assert first.finish_reason == "length" and run.steps[1].finish_reason == "tool_calls"
    named = "write_file" if "write_file" in cut_text else "malformed"
    assert [(a.tool, a.problem) for a in first.actions] == [(named, CallProblem.length)]
    assert kinds(events)[0] == ("agent.tool_call", named)
    assert [e["payload"]["valid"] for e in events if e["type"] == "agent.tool_call"] == [
        False, True, True]  # fmt: skip
    told = [{"role": "assistant", "content": cut_text}, {"role": "user", "content": NOT_READ}]
    assert script.sent[1][1]["messages"][-2:] == told
    assert run.ended == "finish" and outcome.solved and module == TASK.reference
    assert reward(events) is not None  # the run is scored, its cut call among its calls


def test_a_path_outside_the_repository_is_an_invalid_call_that_reads_nothing(tmp_path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("the parent's secret")
    script = ScriptedGateway(
        tool_call("read_file", path=str(secret)),
        tool_call("write_file", path="../x.py", content="x"),
        tool_call("read_file", path="nope.py"),
        tool_call("finish"),
    )
    (tmp_path / "repos").mkdir()
    run, _, events, _ = played(script, parent=tmp_path / "repos")
    calls = [(e["payload"]["tool"], e["payload"]["valid"]) for e in events
             if e["type"] == "agent.tool_call"]  # fmt: skip
    assert calls == [("read_file", False), ("write_file", False), ("read_file", False),
                     ("finish", True)]  # fmt: skip
    results = [m["content"] for _, body in script.sent[1:] for m in body["messages"][-1:]]
    assert "the parent's secret" not in " ".join(results)
    assert "inside the repository" in results[0]
    assert "no such file" in results[2]
    assert list((tmp_path / "repos").iterdir()) == []  # no x.py, and the repository removed


def test_the_budget_ends_a_run() -> None:
    script = ScriptedGateway(*(tool_call("run_tests") for _ in range(3)))
    run, _, events, _ = played(script, AgentSettings(max_calls=3))
    assert run.ended == "budget" and len(script.sent) == 3
    assert sum(e["type"] == "agent.tool_call" for e in events) == 3


def test_an_over_long_history_ends_the_run() -> None:
    error = {"message": "too long", "type": "invalid_request_error",
             "code": "context_length_exceeded"}  # fmt: skip
    refused = httpx2.Response(400, json={"error": error})
    run, _, events, _ = played(ScriptedGateway(tool_call("run_tests"), refused))
    assert run.ended == "context" and len(run.steps) == 1
    assert kinds(events) == [("agent.tool_call", "run_tests")]
    assert [e["type"] for e in events][-2:] == ["interaction.completed", "followup.sent"]


def test_broken_calls_are_named_as_the_harness_names_them() -> None:
    named = [c.tool for c in broken_calls('<tool_call>{}<tool_call>{"name": "finish"')]
    assert named == ["malformed", "finish"]


# -- a real gateway on the tiny model (``served``: the session's shared one) ----------------------


@pytest.mark.slow
def test_the_real_loop_joins_each_run_and_emits_contract_events(served) -> None:
    serve, key = served
    emitter = Contract()
    settings = AgentWorldSettings(max_tokens=16, max_calls=3,
                                  tasks=("add", "negate", "upper", "double"))  # fmt: skip
    asks = round_asks(4, seed=7, org_id="acme", settings=settings)  # one run of each task
    extends = 'rtrl_gateway_calls_total{outcome="extends"}'
    before = serve.metrics().get(extends, 0.0)  # the gateway is the session's shared one
    with httpx.Client(base_url=serve.url, headers={"Authorization": f"Bearer {key}"},
                      timeout=120) as http:  # fmt: skip
        outcomes = play_agents(http, emitter, asks, settings, concurrency=4)
    ids = [o.run.interaction_id for o in outcomes]
    assert len(set(ids)) == 4  # one interaction per run
    follow_ups = 0
    for o in outcomes:
        assert o.run.joined, [s.interaction_id for s in o.run.steps]
        assert len(o.run.steps) >= 2  # the tiny model answers in prose: nudged once at least
        follow_ups += len(o.run.steps) - 1
        events = emitter.of(o.run.interaction_id)
        assert events[0]["type"] == "interaction.started"
        assert {e["user_id"] for e in events} == {o.user_id}
        calls = sum(e["type"] == "agent.tool_call" for e in events)
        assert calls == len(o.run.turn.tool_calls)  # every call reported, none dropped
        assert any(e["type"] == "interaction.completed" for e in events)
        assert reward(events) is not None
    assert len(emitter.events) == sum(len(emitter.of(i)) for i in ids)
    t = tally(outcomes)
    assert t["runs"] == 4 and t["split"] == 0
    counts = serve.metrics_when(extends, before + follow_ups)
    assert counts[extends] - before >= follow_ups


@pytest.mark.slow
def test_agent_world_run_lands_every_run_and_reports_the_round(tmp_path: Path) -> None:
    kafka_port, http_port = free_port_block(2), free_port_block(2)  # collector, gateway
    done = run_rtrl(
        ["--world", "agent", "--port", str(kafka_port), "--collector-port", str(http_port),
         "--gateway-port", str(http_port + 1), "--interactions", "30", "--window-s", "4",
         "--rounds", "1", "--round-users", "9", "--ab-users", "0", "--max-tokens", "16",
         "--agent-calls", "2", "--seed", "1", "--model", "tiny", "--engine", "transformers"],
        tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "agent runs served by" in done.stderr and "broken tool calls" in done.stderr
    assert "training rounds (agent world" in done.stdout
    with duckdb.connect(str(tmp_path / "warehouse" / "warehouse.duckdb"), read_only=True) as con:
        runs = {i for (i,) in con.execute(
            "select distinct interaction_id from stg_events where event_type = "
            "'interaction.started' and user_id like 'u_agent%'").fetchall()}  # fmt: skip
        rollouts = {i for (i,) in con.execute("select interaction_id from stg_rollouts").fetchall()}
        scored = con.execute("select count(*) from rewards where user_id like 'u_agent%' "
                             "and status = 'scored'").fetchone()  # fmt: skip
    assert len(runs) == 18 and scored == (18,)  # two rounds of 3 tasks x 3 runs, one each
    assert rollouts == runs  # every request's rollout under its run's interaction
    summary = read_summary(tmp_path / "summary.json")
    assert summary.world == "agent" and len(summary.rounds) == 2
    first = summary.rounds[0]
    assert first.broken_tool_call_share is not None and first.tool_calls is not None
    assert first.pass_share is not None and first.edits_kept_share is not None
