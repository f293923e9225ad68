"""`rtrl simulate`: simulated users against a running gateway and collector, over the real path.

Each user asks the gateway (`rtrl serve`, or any OpenAI-compatible server) for a task's
function over HTTP, with its user id so that the gateway's experiment split is sticky; reads
the answer with the agent harness; grades its code with the task's hidden tests in the sandbox;
reacts (``rtrl.worlds.text_users``); and reports everything through the SDK as an editor plugin
would, stamped with the interaction, checkpoint and experiment the gateway returned in its headers.
"""

from __future__ import annotations

import argparse
import logging
import os
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import httpx

from agent.harness import Harness, Turn
from agent.sandbox import Grade
from agent.tasks import load_tasks
from infra.lifetime import sigterm_stops
from infra.settings_cli import Option, SettingsOptions
from ingest.sdk import Client, SdkConfig
from models.sampling import SamplingParams
from rtrl.worlds.code_world import CodeWorldSettings, Outcome, React, answer_and_react, tally
from rtrl.worlds.http_users import Later, ask_text
from rtrl.worlds.steady_traffic import Traffic, steady
from rtrl.worlds.text_users import HiddenTaste, Reaction, react

log = logging.getLogger("rtrl.simulate")
KEY_ENV = "RTRL_API_KEY"
_WORLD = CodeWorldSettings()  # the code world's tasks and sampling settings


@dataclass(frozen=True, kw_only=True)
class SimulateSettings:
    """Where the simulated users go (the gateway, the collector, the key's org) and how many."""

    gateway: str = field(metadata={"help": "the gateway's base URL (without /v1)"})
    collector: str = field(metadata={"help": "the collector's base URL"})
    org: str = field(metadata={"help": "the org the API key belongs to"})
    users: int = field(default=20, metadata={"help": "simulated users"})
    per_user: int = field(default=1, metadata={"help": "tasks per user"})
    max_tokens: int = _WORLD.max_tokens  # the most tokens of each answer; its option has no help
    seed: int = 0  # the users' tastes and tasks; its option has no help
    temperature: float = field(
        default=_WORLD.temperature, metadata={"help": "sampling temperature (the code world's)"}
    )
    tasks: Literal["easy", "shipped"] = field(
        default="easy", metadata={"help": "the code world's easy tasks, or the shipped harder ones"}
    )
    rate_per_min: float = field(
        default=0.0,
        metadata={
            "help": "steady traffic: interactions a minute (Poisson arrivals) from the --users "
            "users, until SIGTERM or Ctrl-C (or --duration-s); 0: each user's --per-user tasks "
            "once, then exit"
        },
    )
    duration_s: float = field(
        default=0.0, metadata={"help": "steady traffic: stop after this long (0: when told)"}
    )
    threads: int = field(
        default=4, metadata={"help": "steady traffic: interactions in flight at most"}
    )

    @property
    def sampling(self) -> SamplingParams:
        return SamplingParams(max_tokens=self.max_tokens, temperature=self.temperature,
                              stop=_WORLD.stop)  # fmt: skip


_REQUIRED = Option(required=True)
_NO_HELP = Option(verbatim=True, type=int)  # written by hand without one
SIMULATE_OPTIONS = SettingsOptions(
    SimulateSettings,
    typed_text=False,
    options={
        "gateway": _REQUIRED,
        "collector": _REQUIRED,
        "org": _REQUIRED,
        "max_tokens": _NO_HELP,
        "seed": _NO_HELP,
    },
)


def simulate(http: httpx.Client, sdk: Client, users: int, per_user: int, seed: int,
             params: SamplingParams | None = None,
             tasks: Literal["easy", "shipped"] = "easy") -> Counter[str]:  # fmt: skip
    """``users`` users with hidden tastes, ``per_user`` tasks each; returns what happened
    (``rtrl.worlds.code_world.tally``). Their second looks at accepted edits are reported a few
    seconds after the last answer."""
    rng = random.Random(seed)
    pool = load_tasks(tasks)
    harness = Harness()
    params = params or SimulateSettings(gateway="", collector="", org="").sampling
    outcomes: list[Outcome] = []
    later = Later(sdk)
    for u in range(users):
        user_id, taste = f"u_sim{seed}_{u:05d}", HiddenTaste.draw(rng)
        for _ in range(per_user):
            task = rng.choice(pool)
            answer = ask_text(http, user_id, task.prompt, params)
            fields = {"user_id": user_id, "session_id": f"s_{user_id}"}
            outcomes.append(answer_and_react(
                sdk, answer, task, _reacting(taste, rng), fields, later, harness))  # fmt: skip
    later.drain()
    return tally(outcomes)


def simulate_steady(http: httpx.Client, sdk: Client, settings: SimulateSettings,
                    stop: Callable[[], bool],
                    traffic: Traffic[Outcome] | None = None,
                    ) -> tuple[Counter[str], Traffic[Outcome]]:  # fmt: skip
    """Steady traffic (``rtrl.worlds.steady_traffic``) from a pool of ``settings.users`` users,
    each with a hidden taste and many interactions over time, asking for the world's tasks."""
    draw = random.Random(settings.seed)
    tastes = [HiddenTaste.draw(draw) for _ in range(settings.users)]
    pool = load_tasks(settings.tasks)
    harness, later, params = Harness(), Later(sdk), settings.sampling

    def one(rng: random.Random) -> Outcome:
        u = rng.randrange(settings.users)
        user_id, task = f"u_sim{settings.seed}_{u:05d}", rng.choice(pool)
        answer = ask_text(http, user_id, task.prompt, params)
        fields = {"user_id": user_id, "session_id": f"s_{user_id}"}
        return answer_and_react(sdk, answer, task, _reacting(tastes[u], rng), fields, later,
                                harness)  # fmt: skip

    traffic = steady(one, settings.rate_per_min, stop, seed=settings.seed,
                     threads=settings.threads, duration_s=settings.duration_s,
                     traffic=traffic)  # fmt: skip
    later.drain()
    return tally(traffic.outcomes), traffic


def register(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("simulate", help="simulated users against a running gateway and "
                       "collector: tasks with hidden tests, reactions through the SDK",
                       description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    SIMULATE_OPTIONS.add_to(s)
    s.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    settings = SIMULATE_OPTIONS.read(args)
    key = os.environ.get(KEY_ENV)
    if not key:
        log.error("the API key (for the gateway and the collector) comes from $%s", KEY_ENV)
        return 2
    config = SdkConfig(endpoint=settings.collector, api_key=key, org_id=settings.org)
    headers = {"Authorization": f"Bearer {key}"}
    with (
        httpx.Client(base_url=settings.gateway, headers=headers, timeout=600) as http,
        Client(config) as sdk,
    ):
        if settings.rate_per_min > 0:
            counts, traffic = simulate_steady(http, sdk, settings, sigterm_stops())
            counts.update(
                failed=sum(traffic.failed.values()),
                refused=sum(traffic.refused.values()),
                shed=traffic.shed,
            )
        else:
            counts = simulate(http, sdk, settings.users, settings.per_user, settings.seed,
                              settings.sampling, settings.tasks)  # fmt: skip
        left = sdk.flush(timeout=60)
    print(" ".join(f"{k}={v}" for k, v in sorted(counts.items())))
    if left:
        log.warning("%d events not yet acknowledged (kept in the SDK's spool)", left)
    return 0


def _reacting(taste: HiddenTaste, rng: random.Random) -> React:
    """How a user of this taste reacts to a graded turn (``rtrl.worlds.text_users.react``)."""

    def reacting(turn: Turn, graded: Grade | None) -> Reaction:
        return react(turn, bool(graded and graded.passed), taste, rng)

    return reacting
