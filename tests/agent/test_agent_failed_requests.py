"""An agent run whose request the serving side fails (a 5xx, a lost connection) ends there, as
its user would see it, with what it did so far: one failed request never ends a whole world's
round (a llama-server starved of CPU answered one 502 and ended a seed's run)."""

from __future__ import annotations

import httpx2
import openai

from agent.tasks import get_task
from agent.tool_agent import AgentSettings, run_agent
from agent.workspace import MODULE, Workspace
from tests.support.scripted_gateway import ScriptedGateway, tool_call

TASK = get_task("double")


def test_a_502_mid_run_ends_it_with_the_edits_it_made() -> None:
    failed = httpx2.Response(502, json={"error": {"message": "upstream"}})
    script = ScriptedGateway(tool_call("write_file", path=MODULE, content=TASK.reference), failed)
    with Workspace(TASK) as repo:
        run = run_agent(script.client(), repo, "u1", AgentSettings(constrained=True))
        assert repo.module() == TASK.reference
    assert run.ended == "error" and len(run.steps) == 1 and len(script.sent) == 2
    assert run.interaction_id == "i_run1" and run.turn.edits


def test_a_failed_first_request_leaves_a_run_with_no_interaction() -> None:
    def refuse(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ConnectError("connection refused", request=request)

    http = httpx2.Client(transport=httpx2.MockTransport(refuse))
    client = openai.OpenAI(base_url="http://gateway/v1", api_key="k", http_client=http,
                           max_retries=0)  # fmt: skip
    with Workspace(TASK) as repo:
        run = run_agent(client, repo, "u1", AgentSettings())
    assert run.ended == "error" and run.steps == []
