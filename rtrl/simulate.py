"""`rtrl simulate`: simulated users against a running gateway and collector, over the real path.

Each user asks the gateway (`rtrl serve`, or any OpenAI-compatible server) for a task's
function over HTTP, with its user id so that the gateway's experiment split is sticky; reads
the answer with the agent harness; grades its code with the task's hidden tests in the sandbox;
reacts (``rtrl.text_users``); and reports everything through the SDK as an editor plugin would,
stamped with the interaction, checkpoint and experiment the gateway returned in its headers.
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import time
from collections import Counter
from dataclasses import dataclass

import httpx

from agent.harness import Harness
from agent.sandbox import grade
from agent.tasks import load_tasks
from ingest.contract import uuid7
from ingest.sdk import Client, SdkConfig
from rtrl.text_users import HiddenTaste, plugin_events, react

log = logging.getLogger("rtrl.simulate")
KEY_ENV = "RTRL_API_KEY"


@dataclass(frozen=True)
class Served:
    interaction_id: str
    text: str
    output_tokens: int
    latency_ms: int
    checkpoint_id: str | None
    experiment: dict[str, str] | None


def ask(http: httpx.Client, user_id: str, prompt: str, max_tokens: int) -> Served:
    """One chat completion from the gateway for ``user_id``."""
    interaction = f"i_{uuid7()}"
    started = time.perf_counter()
    answer = http.post(
        "/v1/chat/completions",
        json={"model": "default", "messages": [{"role": "user", "content": prompt}],
              "max_tokens": max_tokens},
        headers={"X-Rtrl-User-Id": user_id, "X-Rtrl-Interaction-Id": interaction},
    )  # fmt: skip
    answer.raise_for_status()
    latency_ms = round((time.perf_counter() - started) * 1000)
    body = answer.json()
    name, _, arm = (answer.headers.get("x-rtrl-experiment") or "").partition(":")
    return Served(
        answer.headers.get("x-rtrl-interaction-id") or interaction,
        body["choices"][0]["message"]["content"] or "",
        int(body.get("usage", {}).get("completion_tokens", 0)),
        latency_ms,
        answer.headers.get("x-rtrl-checkpoint-id"),
        {"name": name, "arm": arm} if arm else None,
    )


def simulate(http: httpx.Client, sdk: Client, users: int, per_user: int, seed: int,
             max_tokens: int = 256) -> Counter[str]:  # fmt: skip
    """``users`` users with hidden tastes, ``per_user`` tasks each; returns what happened."""
    rng = random.Random(seed)
    tasks = load_tasks()
    harness = Harness()
    tally: Counter[str] = Counter()
    for u in range(users):
        user_id, taste = f"u_sim{seed}_{u:05d}", HiddenTaste.draw(rng)
        for _ in range(per_user):
            task = rng.choice(tasks)
            served = ask(http, user_id, task.prompt, max_tokens)
            turn = harness.read(served.text)
            code = turn.code()
            passed = bool(code) and grade(code, task).passed
            reaction = react(turn, passed, taste, rng)
            fields: dict[str, object] = {"user_id": user_id, "session_id": f"s_{user_id}"}
            if served.checkpoint_id:
                fields["checkpoint_id"] = served.checkpoint_id
            if served.experiment:
                fields["experiment"] = served.experiment
            for event in plugin_events(turn, reaction, served.latency_ms, served.output_tokens):
                sdk.emit(event.type, served.interaction_id, event.payload, **fields)
            tally.update(
                interactions=1,
                edits=bool(turn.edits),
                passed=passed,
                accepted=bool(reaction.accepted),
                dissatisfied=reaction.dissatisfied,
                invalid_tool_calls=any(not c.valid for c in turn.tool_calls),
            )
    return tally


def register(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("simulate", help="simulated users against a running gateway and "
                       "collector: tasks with hidden tests, reactions through the SDK",
                       description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    s.add_argument("--gateway", required=True, help="the gateway's base URL (without /v1)")
    s.add_argument("--collector", required=True, help="the collector's base URL")
    s.add_argument("--org", required=True, help="the org the API key belongs to")
    s.add_argument("--users", type=int, default=20, help="simulated users (default 20)")
    s.add_argument("--per-user", type=int, default=1, help="tasks per user (default 1)")
    s.add_argument("--max-tokens", type=int, default=256)
    s.add_argument("--seed", type=int, default=0)
    s.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    key = os.environ.get(KEY_ENV)
    if not key:
        log.error("the API key (for the gateway and the collector) comes from $%s", KEY_ENV)
        return 2
    config = SdkConfig(endpoint=args.collector, api_key=key, org_id=args.org)
    headers = {"Authorization": f"Bearer {key}"}
    with (
        httpx.Client(base_url=args.gateway, headers=headers, timeout=600) as http,
        Client(config) as sdk,
    ):
        tally = simulate(http, sdk, args.users, args.per_user, args.seed, args.max_tokens)
        left = sdk.flush(timeout=60)
    print(" ".join(f"{k}={v}" for k, v in sorted(tally.items())))
    if left:
        log.warning("%d events not yet acknowledged (kept in the SDK's spool)", left)
    return 0
