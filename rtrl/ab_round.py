"""The closing experiment of `rtrl run`: the last promoted checkpoint against the first, as a
real A/B test through the gateway's traffic split.

`rtrl serve` runs with the experiment ``final-ab`` and two arms, ``control`` (the first
checkpoint) and ``treatment`` (the last promoted), half the users each by a sticky hash of the
user id. The users of the training
rounds ask it over HTTP for their completions (token ids come back through vLLM's
``return_token_ids`` extension, since these users react to ids), react as they do in the
rounds, and report through the SDK stamped with the interaction, checkpoint and arm the gateway
returned in its headers. The warehouse's A/B report then compares the arms per user, the unit
of randomisation, with the delta method's 95 % intervals.
"""

from __future__ import annotations

import random
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import httpx

from ingest.contract import uuid7
from ingest.sdk import Client
from rtrl.token_users import TASKS, Population, draw_outcome, interaction_events
from trainer.sampling import SamplingParams

EXPERIMENT = "final-ab"
CONTROL, TREATMENT = "control", "treatment"  # the first checkpoint, the last promoted


def arms(first: str, last: str) -> str:
    """The gateway's ``--arms`` for an even split of ``first`` against ``last``.

    >>> arms("tiny-0000", "tiny-0002")
    'control=tiny-0000:50,treatment=tiny-0002:50'
    """
    return f"{CONTROL}={first}:50,{TREATMENT}={last}:50"


@dataclass(frozen=True)
class Answer:
    interaction_id: str
    token_ids: tuple[int, ...]
    checkpoint_id: str
    arm: str | None


def ask(http: httpx.Client, user_id: str, task: str, params: SamplingParams) -> Answer:
    """One chat completion for ``user_id``, with its token ids."""
    interaction = f"i_{uuid7()}"
    answer = http.post(
        "/v1/chat/completions",
        json={"model": "default", "return_token_ids": True, "max_tokens": params.max_tokens,
              "temperature": params.temperature, "top_p": params.top_p,
              "messages": [{"role": "user", "content": f"Write `{task}` in Python."}]},
        headers={"X-Rtrl-User-Id": user_id, "X-Rtrl-Interaction-Id": interaction},
    )  # fmt: skip
    answer.raise_for_status()
    name, _, arm = (answer.headers.get("x-rtrl-experiment") or "").partition(":")
    return Answer(
        answer.headers.get("x-rtrl-interaction-id") or interaction,
        tuple(answer.json()["choices"][0]["token_ids"] or ()),
        answer.headers["x-rtrl-checkpoint-id"],
        arm if name == EXPERIMENT else None,
    )


def play_ab(http: httpx.Client, client: Client, population: Population, users: int,
            per_user: int, seed: int, params: SamplingParams,
            concurrency: int = 16) -> Counter[str]:  # fmt: skip
    """``users`` users, ``per_user`` asks each, through the gateway; interactions per arm."""
    rng = random.Random(seed)
    asks = [(f"u_ab{seed}_{u:05d}", rng.choice(TASKS)) for u in range(users)
            for _ in range(per_user)]  # fmt: skip
    with ThreadPoolExecutor(concurrency) as pool:
        answers = list(pool.map(lambda a: ask(http, a[0], a[1], params), asks))
    served: Counter[str] = Counter()
    for n, ((user_id, task), answer) in enumerate(zip(asks, answers, strict=True)):
        if answer.arm is None or not answer.token_ids:
            served["outside the experiment"] += 1
            continue
        served[answer.arm] += 1
        reaction = population.react(answer.token_ids, rng, task)
        accepted, dissatisfied = draw_outcome(reaction, rng)
        fields = {
            "user_id": user_id,
            "session_id": f"s_{user_id}",
            "checkpoint_id": answer.checkpoint_id,
            "experiment": {"name": EXPERIMENT, "arm": answer.arm},
        }
        for kind, payload in interaction_events(reaction, accepted, dissatisfied, f"e{n}"):
            client.emit(kind, answer.interaction_id, payload, **fields)
    return served


@dataclass(frozen=True)
class FinalAb:
    """Where the closing experiment runs: the run's registry, keys, Kafka and SDK."""

    registry: str
    keys_db: str
    kafka: list[str]
    port: int
    api_key: str
    seed: int


def run_final_ab(setup: FinalAb, first: str, last: str, client: Client, population: Population,
                 users: int, params: SamplingParams, log_file: str) -> Counter[str]:  # fmt: skip
    """Start the gateway with the split, play ``users`` users (two asks each) through it, stop
    it; the interactions per arm."""
    from pathlib import Path

    from rtrl.procs import Stage, http_ready, wait_until

    gateway = Stage(
        "gateway",
        ["serve", "--registry", setup.registry, "--checkpoint", last, "--db", setup.keys_db,
         *setup.kafka, "--experiment", EXPERIMENT, "--arms", arms(first, last), "--port",
         str(setup.port), "--device", "cpu", "--no-follow", "--seed", str(setup.seed)],
        Path(log_file),
    )  # fmt: skip
    gateway.start()
    try:
        wait_until("gateway", lambda: http_ready(setup.port), 120, gateway)
        with httpx.Client(
            base_url=f"http://127.0.0.1:{setup.port}",
            headers={"Authorization": f"Bearer {setup.api_key}"},
            timeout=120,
        ) as http:
            return play_ab(http, client, population, users, 2, setup.seed, params)
    finally:
        gateway.stop()
