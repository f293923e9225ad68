"""The agent world of `rtrl run --world agent`: users give a tool-calling agent a small task in a
small repository, and keep or revert what it wrote by the task's hidden tests.

Each user's run gets a repository of its own (``agent.workspace``: ``solution.py`` with a stub
of one of the *easy* tasks' functions, ``test_solution.py`` with the task's visible cases) and
the agent of ``agent.tool_agent``: the official ``openai`` client pointed at the gateway, the
tools ``read_file``, ``write_file``, ``run_tests`` and ``finish`` carried out for real in that
directory, at most ``max_calls`` requests, every one under the user's ``X-Rtrl-User-Id``, so
that the gateway joins them into one interaction whose rollouts extend one another token for
token. After the run the user grades the module with the task's hidden cases in the sandbox and
reacts by the code world's stated rule (``rtrl.worlds.text_users.by_rule``), the run being one turn
of the harness (its calls and edits in order):

- no edit (nothing written, or only what was already there): a dissatisfied follow-up;
- edits that leave ``solution.py`` as it was: rejected, dissatisfied;
- else accepted when the module runs and defines the function, **kept** (``edit.retention``
  1.0) when it passes every hidden case, **reverted** (``edit.reverted``) ``LOOK_AGAIN_S``
  later when it does not, with a dissatisfied follow-up.

The events go through the SDK as the code world's do (``rtrl.worlds.text_users.now_events``,
``later_events``): ``interaction.started``, one ``agent.tool_call {tool, valid}`` per call the
model made (invalid ones included: an answer the gateway could not read as calls, a call that
cannot be carried out), ``agent.edit_proposed`` per write that changed the repository,
``interaction.completed`` with the run's wait and output tokens, then the verdicts. Under reward
v1 a solved task earns about +2, a wrong edit -2, no edit -1, less 0.5 per invalid call.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx
from pydantic import BaseModel, ConfigDict, Field

from agent.sandbox import Grade, grade
from agent.tasks import Task, get_task
from agent.tool_agent import AgentRun, AgentSettings, run_agent
from agent.tool_schemas import CALL_MAX_TOKENS
from agent.workspace import Workspace
from rtrl.worlds.agent_ab import Look, Run, play_in_looks
from rtrl.worlds.agent_groups import balanced_asks, cycled_tasks
from rtrl.worlds.code_world import CodeWorldSettings
from rtrl.worlds.http_users import LOOK_AGAIN_S, Emitter, Later
from rtrl.worlds.text_users import Reaction, by_rule, later_events, now_events
from rtrl.worlds.user_pool import user_pool
from stats.group_sequential import max_size_ratio, obrien_fleming
from stats.power import runs_per_arm

if TYPE_CHECKING:
    from rtrl.worlds.token_world import RoundFigures

log = logging.getLogger("rtrl.run")


def _with_option(options: Sequence[str], name: str, value: str) -> tuple[str, ...]:
    """``options`` with ``name``'s value replaced.

    >>> _with_option(["--lr", "1", "--epochs", "2"], "--epochs", "3")
    ('--lr', '1', '--epochs', '3')
    """
    out = list(options)
    out[out.index(name) + 1] = value
    return tuple(out)


AGENT_TASKS = ("add", "negate", "upper")
"""The tasks the agent world's users ask for: the easy tasks SmolLM2 solved 20-50 % of the time
with a constrained ``write_file`` (4, 2 and 3 of 8; ``bench/agent_pass_rate.py``,
``bench/RESULTS.md``, "Agent pass rate under constraint"), so that a group of runs holds both
solves and failures."""
AB_BASE_RATE = 0.375
"""Tasks solved a run by the base model on ``AGENT_TASKS``: 9 of 24 (the same bench)."""
AB_EFFECT = 0.15
"""The rise in tasks solved the closing A/B is sized to detect: under half of what the code
world's rounds moved SmolLM2's users' pass rate (0.15 to 0.48, ``bench/RESULTS.md``); the agent
world's two rounds under reward v1 moved it by 0, which is what this world's changes address."""
AB_POWER = 0.95
AB_LOOKS = 2
"""Looks at the closing A/B: at half its users and at all of them, under O'Brien-Fleming
bounds (``stats.group_sequential``: 2.797 and 1.977), so that a clear effect ends it at the
half. The planned users grow by 0.7 % for the same power; ``bench/ab_group_sequential.py``
measures the users it saves on the effects the seeds showed."""


class AgentWorldSettings(BaseModel):
    """The agent world's defaults, for SmolLM2-135M on two CPU cores: a run is up to four
    requests of up to ``CALL_MAX_TOKENS`` tokens, each one call sampled under the tools' grammar
    (``agent.tool_schemas``); every task gets ``runs_per_task`` runs a round."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tasks: tuple[str, ...] = Field(AGENT_TASKS, min_length=1, description="the users' tasks")
    runs_per_task: int = Field(16, ge=2, description="runs of each task a round: its group")
    held_out: float = Field(
        0.5,
        ge=0,
        lt=1,
        description="the learner's held-out share (the code world's: the gate's evidence)",
    )
    max_calls: int = Field(4, ge=1, description="requests per run")
    max_tokens: int = Field(CALL_MAX_TOKENS, ge=16, description="tokens per answer at most")
    temperature: float = Field(0.7, gt=0)
    example: bool = Field(True, description="start each run's history with one worked run")
    constrained: bool = Field(True, description="valid actions by construction (tool_choice)")
    ab_base_rate: float = Field(AB_BASE_RATE, gt=0, lt=1)
    ab_effect: float = Field(AB_EFFECT, gt=0, lt=1)
    ab_looks: int = Field(AB_LOOKS, ge=1, le=5, description="looks at the closing A/B (1: fixed)")
    learner: tuple[str, ...] = _with_option(
        CodeWorldSettings.model_fields["learner"].default, "--target-kl", "0.002"
    )
    """The code world's learner (a LoRA adapter) with its early stop at 0.002 nats a token,
    not 0.006: the gate's KL limit (1 nat) is per interaction, and an agent run is several
    calls, about 300 model tokens in all against a code-world answer's 60-90. At 0.006 a
    token, two rounds of 40 runs ended at 1.44 and 1.30 nats a run, both rejected for it."""

    @property
    def round_users(self) -> int:
        """Users a round: ``runs_per_task`` for each task."""
        return len(self.tasks) * self.runs_per_task

    @property
    def ab_users(self) -> int:
        """The closing A/B's users at most, two runs each, so its runs per arm: sized in
        advance for ``AB_POWER`` to detect tasks solved moving from ``ab_base_rate`` by
        ``ab_effect`` (``stats.power.runs_per_arm``, two-sided 5 %), times what its looks cost
        in power (``stats.group_sequential.max_size_ratio``)."""
        fixed = runs_per_arm(self.ab_base_rate, self.ab_base_rate + self.ab_effect,
                             power=AB_POWER)  # fmt: skip
        if self.ab_looks == 1:
            return fixed
        return math.ceil(fixed * max_size_ratio(self.ab_bounds, power=AB_POWER))

    @property
    def ab_bounds(self) -> tuple[float, ...]:
        """The closing A/B's bound on tasks solved's ``|z|`` at each look."""
        return obrien_fleming(self.ab_looks)

    def task_list(self) -> tuple[Task, ...]:
        return tuple(get_task(name) for name in self.tasks)

    def train_args(self) -> list[str]:
        """`rtrl train`'s options: the learner's, with the world's held-out share (which the
        users' ids are drawn for: ``rtrl.worlds.agent_groups``; `rtrl run` fits the gate's
        minimums to it, ``rtrl.run.gate_floor``), without candidate evals (they read one
        answer's text with the harness, not a run of calls), and with the pre-serve tool-opening
        check (``release.tool_opening``: a candidate far less likely than its parent to open a
        task with a tool call is blocked as tool avoidance)."""
        learner = _with_option(self.learner, "--held-out", str(self.held_out))
        return [*learner, "--eval-prompts", "0", "--tool-opening"]

    @property
    def agent(self) -> AgentSettings:
        return AgentSettings(self.max_calls, self.max_tokens, self.temperature, 1.0,
                             self.example, constrained=self.constrained)  # fmt: skip


@dataclass(frozen=True)
class AgentOutcome:
    """One user's run, the hidden cases' grade of the module after it, and the reaction."""

    user_id: str
    task: Task
    run: AgentRun
    graded: Grade | None  # None: solution.py was not changed
    reaction: Reaction

    @property
    def solved(self) -> bool:
        return self.graded is not None and self.graded.passed


@dataclass
class ClosingRuns:
    """The agent world's closing A/B by its truth: every run, and the look it stopped at
    (``play_agent_ab``; None before it is played)."""

    runs: list[AgentOutcome] = field(default_factory=list)
    look: Look | None = None


def openai_client(http: httpx.Client) -> Any:
    """An ``openai.OpenAI`` on the gateway ``http`` talks to, with its API key and read
    timeout; it never retries (a retried request would be a second answer in the run)."""
    import openai

    key = http.headers.get("authorization", "").removeprefix("Bearer ")
    return openai.OpenAI(base_url=f"{str(http.base_url).rstrip('/')}/v1", api_key=key or "none",
                         timeout=http.timeout.read or 600.0, max_retries=0)  # fmt: skip


def _run_and_grade(client: Any, user_id: str, task: Task,
                   settings: AgentWorldSettings) -> tuple[AgentRun, Grade | None]:  # fmt: skip
    with Workspace(task) as repo:
        run = run_agent(client, repo, user_id, settings.agent)
        return run, grade(repo.module(), task) if repo.module_changed() else None


def react_and_report(client: Emitter, user_id: str, task: Task, run: AgentRun,
                     graded: Grade | None, fields: dict[str, Any],
                     later: Later) -> AgentOutcome:  # fmt: skip
    """The user's reaction to the run by the stated rule, reported through ``client`` under the
    interaction and checkpoint the gateway named; the second look is appended to ``later``."""
    turn = run.turn
    reaction = by_rule(turn, graded)
    first = run.steps[0]
    stamp = {**fields, "checkpoint_id": first.checkpoint_id}
    if first.experiment:
        stamp["experiment"] = {"name": first.experiment[0], "arm": first.experiment[1]}
    for event in now_events(turn, reaction, run.latency_ms, run.output_tokens):
        client.emit(event.type, run.interaction_id, event.payload, **stamp)
    for event in later_events(turn, reaction, round(LOOK_AGAIN_S)):
        later.append((event.type, run.interaction_id, event.payload, stamp))
    return AgentOutcome(user_id, task, run, graded, reaction)


def play_agents(
    http: httpx.Client, client: Emitter, asks: Sequence[tuple[str, Task]],
    settings: AgentWorldSettings, concurrency: int = 16,
    fields: Callable[[str], dict[str, Any]] | None = None,
) -> list[AgentOutcome]:  # fmt: skip
    """Every ``(user_id, task)`` runs the agent through the gateway (``concurrency`` runs at a
    time: the gateway batches their requests), then reacts as each run is graded; the second
    looks are sent ``LOOK_AGAIN_S`` after each reaction. A run the serving side failed ends
    there and is reacted to as it stands (``ended_error``); one whose first request failed
    has no interaction and no outcome (counted in the log)."""
    api = openai_client(http)
    later, outcomes, lost = Later(client), [], 0
    with user_pool(concurrency) as pool:
        runs = pool.map(lambda ask: _run_and_grade(api, ask[0], ask[1], settings), asks)
        for (user_id, task), (run, graded) in zip(asks, runs, strict=True):
            if not run.steps:  # its first request failed: no interaction to react to
                lost += 1
                continue
            stamp = fields(user_id) if fields else {"user_id": user_id,
                                                    "session_id": f"s_{user_id}"}  # fmt: skip
            outcomes.append(react_and_report(client, user_id, task, run, graded, stamp, later))
    later.drain()
    if lost:
        log.warning("%d of %d agent runs failed on their first request: no interaction, no "
                    "reaction", lost, len(asks))  # fmt: skip
    split = sum(not o.run.joined for o in outcomes)
    if split:
        log.warning("%d of %d agent runs were not joined into one interaction by the gateway",
                    split, len(outcomes))  # fmt: skip
    return outcomes


def round_asks(users: int, seed: int, org_id: str,
               settings: AgentWorldSettings | None = None) -> list[tuple[str, Task]]:  # fmt: skip
    """A round's users, of ``org_id`` (the organisation whose API key the runs use): the same
    number of runs for each of the world's tasks (``users`` // tasks, at least one), as many of
    each held out (``rtrl.worlds.agent_groups``); the user ids are the round's own (``seed``),
    so that no run's text is ever found under another round's user.

    >>> sorted({t.function for _, t in round_asks(8, 1001, "acme")}) == sorted(AGENT_TASKS)
    True
    """
    settings = settings or AgentWorldSettings()
    per_task = max(1, users // len(settings.tasks))
    return balanced_asks(settings.task_list(), per_task, settings.held_out, seed, org_id)


def tally(outcomes: Sequence[AgentOutcome]) -> Counter[str]:
    """What happened, counted: runs, calls (every call the model made), invalid_calls,
    runs_with_invalid, edits (runs with one), solved, accepted, kept, reverted, dissatisfied,
    split (runs the gateway did not join), and how runs ended (ended_finish, ...)."""
    out: Counter[str] = Counter()
    for o in outcomes:
        calls = o.run.turn.tool_calls
        invalid = sum(not c.valid for c in calls)
        r = o.reaction
        out.update(runs=1, calls=len(calls), invalid_calls=invalid,
                   runs_with_invalid=invalid > 0, edits=bool(o.run.turn.edits),
                   solved=o.solved, accepted=bool(r.accepted),
                   kept=bool(r.accepted) and not r.reverted, reverted=r.reverted,
                   dissatisfied=r.dissatisfied, split=not o.run.joined)  # fmt: skip
        out[f"ended_{o.run.ended}"] += 1
    return out


def broken_share(t: Counter[str]) -> float:
    """Invalid calls among all calls the model made (0 when it made none)."""
    return t["invalid_calls"] / t["calls"] if t["calls"] else 0.0


def round_figures(outcomes: Sequence[AgentOutcome]) -> RoundFigures:
    """A round's figures, as `rtrl run` keeps them: the one checkpoint that served it."""
    from rtrl.worlds.token_world import RoundFigures  # torch: not for `rtrl --help`

    served = {s.checkpoint_id for o in outcomes for s in o.run.steps}
    if len(served) != 1:
        raise RuntimeError(f"the served checkpoint changed within a round: {sorted(served)}")
    t, n = tally(outcomes), len(outcomes)
    return RoundFigures(served.pop(), n, t["accepted"], t["runs_with_invalid"],
                        t["accepted"] / n, 0, t["solved"], t["kept"], t["dissatisfied"],
                        t["calls"], t["invalid_calls"])  # fmt: skip


def figures_text(t: Counter[str]) -> str:
    """One line of a round's figures, for the log."""
    n = t["runs"] or 1
    ended = ", ".join(f"{k[6:]} {v}" for k, v in sorted(t.items()) if k.startswith("ended_"))
    return (f"tasks solved {t['solved'] / n:.2f}, edits kept {t['kept'] / n:.2f}, broken tool "
            f"calls {t['invalid_calls']}/{t['calls']} ({broken_share(t):.2f}), dissatisfied "
            f"{t['dissatisfied'] / n:.2f}; runs ended: {ended}")  # fmt: skip


def play_agent_ab(
    http: httpx.Client, client: Emitter, users: int, per_user: int, seed: int,
    settings: AgentWorldSettings, arms: tuple[str, str], concurrency: int = 32,
) -> tuple[list[AgentOutcome], Look]:  # fmt: skip
    """The closing A/B test's users, ``per_user`` runs each, through the gateway's split (each
    user's runs stay in one arm: the split hashes the user id), in ``settings.ab_looks`` equal
    shares: after each share, tasks solved is looked at (``rtrl.worlds.agent_ab.solved_look``)
    and the test stops at the first look that crosses its bound; ``arms``: the control's
    and the treatment's names. Every run's outcome, and the look it stopped at."""
    drawn = cycled_tasks(users * per_user, settings.task_list(), seed)
    asks = [(f"u_agentab{seed}_{n // per_user:05d}", task) for n, task in enumerate(drawn)]
    outcomes: list[AgentOutcome] = []

    def play(start: int, stop: int) -> list[Run]:
        share = play_agents(http, client, asks[start * per_user : stop * per_user], settings,
                            concurrency)  # fmt: skip
        outcomes.extend(share)
        return [(arm_of(o), o.user_id, o.solved) for o in share]

    look = play_in_looks(users, settings.ab_bounds, arms, play)
    return outcomes, look


def arm_of(outcome: AgentOutcome) -> str:
    """The experiment arm that served the run (every request of a run is served by one)."""
    first = outcome.run.steps[0]
    return first.experiment[1] if first.experiment else "outside the experiment"
