"""The closing experiment of `rtrl run`: the last promoted checkpoint against the first, as a
real A/B test through the gateway's traffic split.

`rtrl serve` runs with the experiment ``final-ab`` and two arms, ``control`` (the first
checkpoint) and ``treatment`` (the last promoted), half the users each by a sticky hash of the
user id. The users of the training rounds ask it over HTTP for their completions (token ids
come back through vLLM's ``return_token_ids`` extension, since these users react to ids), react
as they do in the rounds (a few seconds later they keep or revert the edits they accepted, and
some follow up dissatisfied; the latency they report is the gateway's real timing), and report
through the SDK stamped with the interaction, checkpoint and arm the gateway returned in its
headers. The warehouse's A/B report then compares the arms per user, the unit of
randomisation, with the delta method's 95 % intervals: edits kept, dissatisfied follow-ups,
latency and mean reward.

In the code world (``rtrl run --world code``) the users are the rounds' text users instead
(``rtrl.worlds.code_world``): each asks for two easy tasks, the harness reads the answer, the
sandbox grades it, and they accept, keep or revert by the same stated rule. In the agent world
(``--world agent``) each user runs the tool-calling agent twice (``rtrl.worlds.agent_world``); the
split hashes the user id, so every request of a run is served by one arm.
"""

from __future__ import annotations

import logging
import random
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from agent.tasks import Task
from ingest.sdk import Client
from models.sampling import SamplingParams
from rtrl.run.gateway import GatewaySetup, gateway
from rtrl.worlds.agent_world import AgentWorldSettings, ClosingRuns, arm_of, play_agent_ab
from rtrl.worlds.code_world import play_users, round_asks
from rtrl.worlds.http_users import ask_all
from rtrl.worlds.token_users import POPULATIONS, TASKS, Population
from rtrl.worlds.token_world import Later, react_and_report

if TYPE_CHECKING:
    from rtrl.run.rounds import TrainingRounds

log = logging.getLogger("rtrl.run")  # `rtrl run`'s own lines, as the rest of the run logs them
EXPERIMENT = "final-ab"
SHARED_EXPERIMENT = "final-ab-one-server"
"""``rtrl run --ab-compare-servers``: the closing A/B's users again, both arms on one llama-server
(``rtrl serve --engine-share-base``), to time it against a server per arm."""
CODE_AB_CONCURRENCY = 32
"""The code world's A/B users in flight: so that each arm's server decodes as many together as a
round's one server does (16); at the rounds' 16 the two arms' servers had about 8 each."""
CONTROL, TREATMENT = "control", "treatment"  # the first checkpoint, the last promoted


def arms(first: str, last: str) -> str:
    """The gateway's ``--arms`` for an even split of ``first`` against ``last``.

    >>> arms("tiny-0000", "tiny-0002")
    'control=tiny-0000:50,treatment=tiny-0002:50'
    """
    return f"{CONTROL}={first}:50,{TREATMENT}={last}:50"


def play_ab(http: httpx.Client, client: Client, population: Population, users: int,
            per_user: int, seed: int, params: SamplingParams,
            concurrency: int = 16) -> Counter[str]:  # fmt: skip
    """``users`` users, ``per_user`` asks each, through the gateway; interactions per arm."""
    rng = random.Random(seed)
    asks = [(f"u_ab{seed}_{u:05d}", rng.choice(TASKS)) for u in range(users)
            for _ in range(per_user)]  # fmt: skip
    answers = ask_all(http, asks, params, concurrency)
    served: Counter[str] = Counter()
    later = Later(client)
    for n, ((user_id, task), answer) in enumerate(zip(asks, answers, strict=True)):
        if answer.experiment is None or answer.experiment[0] != EXPERIMENT:
            served["outside the experiment"] += 1
            continue
        arm = answer.experiment[1]
        served[arm] += 1
        fields = {"user_id": user_id, "session_id": f"s_{user_id}",
                  "experiment": {"name": EXPERIMENT, "arm": arm}}  # fmt: skip
        react_and_report(client, population, rng, task, answer, f"e{n}", fields, later)
    later.drain()
    return served


def play_code_ab(http: httpx.Client, client: Client, users: int, per_user: int, seed: int,
                 params: SamplingParams) -> Counter[str]:  # fmt: skip
    """The code world's users, ``per_user`` easy tasks each, through the gateway's split;
    interactions per arm."""
    asks = code_ab_asks(users, per_user, seed)
    outcomes = play_users(http, client, asks, params, concurrency=CODE_AB_CONCURRENCY)
    return Counter(o.answer.experiment[1] if o.answer.experiment else "outside the experiment"
                   for o in outcomes)  # fmt: skip


def code_ab_asks(users: int, per_user: int, seed: int) -> list[tuple[str, Task]]:
    """The closing A/B's code-world asks: ``users`` users, ``per_user`` easy tasks each.

    >>> [(u, t.function) for u, t in code_ab_asks(1, 2, 1)]
    [('u_ab1_00000', 'is_even'), ('u_ab1_00000', 'count_a')]
    """
    drawn = round_asks(users * per_user, seed)
    return [(f"u_ab{seed}_{n // per_user:05d}", task) for n, (_, task) in enumerate(drawn)]


def run_final_ab(setup: GatewaySetup, first: str, last: str, client: Client,
                 population: Population | None, users: int, params: SamplingParams,
                 log_file: Path, agent: AgentWorldSettings | None = None,
                 experiment: str = EXPERIMENT,
                 truth: ClosingRuns | None = None) -> Counter[str]:  # fmt: skip
    """Start the gateway with the split, play ``users`` users (two asks each) through it, stop
    it; the interactions per arm. ``population`` None: the code world's text users, or with
    ``agent`` the agent world's, whose runs and last look are kept in ``truth`` when given (the
    world's truth: tasks solved)."""
    split = ["--experiment", experiment, "--arms", arms(first, last), "--no-follow"]
    with gateway(setup, last, split, log_file) as http:
        if agent is not None:
            outcomes, look = play_agent_ab(http, client, users, 2, setup.seed, agent,
                                           (CONTROL, TREATMENT))  # fmt: skip
            if truth is not None:
                truth.runs.extend(outcomes)
                truth.look = look
            return Counter(arm_of(o) for o in outcomes)
        if population is None:
            return play_code_ab(http, client, users, 2, setup.seed, params)
        return play_ab(http, client, population, users, 2, setup.seed, params)


def play_closing_ab(
    rounds: TrainingRounds,
    closing: GatewaySetup,
    root: Path,
    logs: Path,
    users: int,
    compare_servers: bool = False,
) -> dict[str, float] | None:
    """The last promoted checkpoint against the first, through the gateway's split: its wall
    seconds by how the arms were served (with ``compare_servers``, the same users again on
    one llama-server for both arms); None when no checkpoint after the first was promoted
    (nothing to compare)."""
    from rtrl.run.rounds import SAMPLING  # torch: imported when the loop runs

    first, last = rounds.figures[0].checkpoint_id, rounds.serving
    if first == last:
        log.info("no checkpoint after %s was promoted: no closing A/B test", first)
        return None
    log.info("closing A/B test through the gateway: %s (first) against %s (last promoted), "
             "%d users", first, last, users)  # fmt: skip
    assert last is not None
    rounds.close()  # the rounds' gateway gives its port to the experiment's
    code = rounds.world != "tokens"  # the code or agent world's users, else the token users
    population = None if code else POPULATIONS[rounds.users](rounds.vocab_size)
    params = rounds.code.sampling if code else SAMPLING
    agent = rounds.agent if rounds.world == "agent" else None
    layouts = [("server per arm", closing, EXPERIMENT)]
    if compare_servers:
        shared = replace(closing, serve_args=(*closing.serve_args, "--engine-share-base"))
        layouts.append(("one server", shared, SHARED_EXPERIMENT))
    seconds: dict[str, float] = {}
    for layout, setup, experiment in layouts:
        began = time.monotonic()
        truth = rounds.closing_runs if experiment == EXPERIMENT else None
        with Client(replace(rounds.sdk, spool_path=root / "ab.db")) as client:
            served = run_final_ab(setup, first, last, client, population, users, params,
                                  logs / "gateway.log", agent, experiment, truth)  # fmt: skip
            left = client.flush(timeout=60)
        seconds[layout] = time.monotonic() - began
        unsent = f"; {left} events still in the spool" if left else ""
        log.info("closing A/B (%s): interactions per arm %s in %.0fs%s", layout, dict(served),
                 seconds[layout], unsent)  # fmt: skip
    rounds.played_until = time.monotonic()
    rounds.measure_held_out()  # the last checkpoints', while the A/B's windows close
    return seconds
