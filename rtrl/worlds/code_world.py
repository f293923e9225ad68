"""The code world of `rtrl run --world code`: users who ask for real functions and judge the
code in the answer's text by a stated rule.

Each user asks the gateway over HTTP for one of the *easy* tasks (``agent/tasks.toml``: one
obvious line each, where SmolLM2-135M starts near a quarter), with the task's prompt alone: no
hidden case, expected value or grader is in any prompt, so none is in any rollout the trainer
reads. The agent harness takes the code out of the answer's text and the sandbox runs the
task's hidden cases (``agent.sandbox.grade``). The users' stated rule
(``rtrl.worlds.text_users.by_rule``):

- an answer without a code block is no edit: the user follows up dissatisfied at once;
- an edit is **accepted** when its Python code runs and defines the function asked for (the
  sandbox could call it on every hidden case), else **rejected**, with a dissatisfied follow-up;
- ``LOOK_AGAIN_S`` later (inside the run's shortened reward window) the user looks again at an
  accepted edit: **kept** whole (``edit.retention`` 1.0) when it passed every hidden case, else
  **reverted** (``edit.reverted``), with a dissatisfied follow-up.

So, under reward v1, a passing edit earns about +2, a running but wrong one -1, code that does
not run -1.5, no code at all -1 (less the latency term): the reward ranks the answers by the
hidden tests without ever showing them. The *held_out* tasks are never asked: only the
held-out pass rate (:func:`held_out_pass_rate`, the simulator's own measurement of each
checkpoint, which the platform never trains on) sees them.

`rtrl simulate` shares the per-answer path (:func:`answer_and_react`), with users of a hidden
taste instead of the rule.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from agent.harness import Harness, Turn
from agent.sandbox import Grade, grade
from agent.tasks import Task, load_tasks
from models.sampling import SamplingParams
from rtrl.worlds.http_users import (
    LOOK_AGAIN_S,
    Answer,
    Emitter,
    Later,
    ask_all,
)
from rtrl.worlds.text_users import Reaction, by_rule, later_events, now_events

if TYPE_CHECKING:
    from models.policy import Sampler

React = Callable[[Turn, Grade | None], Reaction]

CLOSING_FENCE = "\n```\n"
"""The code world's stop string, as an editor asking for one function sends it: the answer ends
where its first code block closes (the harness reads a fence left open to the answer's end).
SmolLM2 explains its code after the block: 36 % of the decoded tokens of a 17.8-minute run came
after the first closed block (bench/RESULTS.md). A bare opening fence after prose matches too,
and so does the closing fence of code the model wrote without opening a block (91 of that run's
1,112 answers, about half of them those): cut there, the answer reads as no code, where the
fence left open used to read the prose after it as code that does not run."""


class CodeWorldSettings(BaseModel):
    """The code world's defaults, `make run`'s, sized for SmolLM2-135M on two CPU cores served
    by llama.cpp: two rounds of 240 users (the gate passed nothing below about 165 users a
    round), two answers a task and checkpoint in the candidate evals, and a closing A/B test of
    240 users, so that the whole run fits in about 15 minutes
    (bench/RESULTS.md, "The default run": each stage's minutes, and how often it learns across
    seeds). Three rounds of 336 users and 400 closing users took 28 minutes and moved edits
    kept per interaction +202 % [+116 %, +288 %]; one promotion, as two rounds usually give,
    moves it about a third as much."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rounds: int = Field(2, ge=0, description="training rounds before the closing A/B test")
    extra_rounds: int = Field(
        1, ge=0, description="rounds after `rounds` while nothing has been promoted"
    )
    round_users: int = Field(240, ge=1, description="users per round, one easy task each")
    ab_users: int = Field(240, ge=0, description="closing A/B users, two asks each")
    max_tokens: int = Field(96, ge=16, description="an easy task's answer fits in ~60 tokens")
    temperature: float = Field(0.7, gt=0, description="where SmolLM2 passes ~22 % of easy")
    stop: tuple[str, ...] = Field(
        (CLOSING_FENCE,),
        description="the editor stops the answer at its first code block's closing fence",
    )
    eval_samples: int = Field(8, ge=0, description="answers per held-out task (0: no eval)")
    gate_eval_samples: int = Field(
        2,
        ge=0,
        description="the gate's candidate evals: answers per prompt and held-out task, from "
        "the candidate and from its parent (0: no candidate evals)",
    )
    learner: tuple[str, ...] = (
        "--lora-r", "16", "--lora-alpha", "32", "--lr", "0.0004", "--epochs", "2",
        "--minibatches", "4", "--micro-batch", "8", "--device", "cpu", "--clip", "0.3",
        "--target-kl", "0.006", "--held-out", "0.5", "--mismatch-sample", "16",
        "--exact-behaviour-kl", "0.0001",
    )  # fmt: skip
    """`rtrl train`'s options: a LoRA adapter (minutes on a CPU, not an hour of full
    fine-tuning) at a learning rate that keeps a round inside the gate's KL limit (1 nat a
    rollout, about 0.015 a token for a 64-token answer; on SmolLM2's own answers four steps
    moved it 9e-6 nats a token at 3e-5, 0.009 at 3e-4 and 0.067 at 1e-3). The first epoch
    covers every run in 4 minibatches of whole runs, its rate lowered where the measured KL
    runs ahead of half the gate's limit; the second runs only while that and 0.006 nats a
    token hold (``trainer.epochs``). (Measured under the earlier rule, which stopped inside
    the first epoch past 0.006 nats a token: eight steps at 2e-4 moved it 0.0058, the gate
    measured KL 0.5 a rollout and kept an ESS of 35 %; at 4e-4 the gate gain was +0.56 with a
    lower bound of +0.26, where 2e-4 gave +0.42 and +0.18.) Half the
    users are held out, since the gate judges only with 50 held-out interactions or more (the
    split is by user id: 112 users held out 51, and the gate passed nothing below about 165
    users a round). Where the mismatch check finds the recorded log-probs the learner's own (an
    exact engine: ~1e-5 nats a token), they are the update's pi_old and no scoring pass
    precedes it: a third of an update stopped early. The candidate evals are
    :meth:`train_args`'."""

    def train_args(self) -> list[str]:
        """`rtrl train`'s options: the learner's, then the candidate evals': before it may
        serve, the candidate and its parent answer 4 of the round's prompts and the held-out
        tasks ``gate_eval_samples`` times each (the same seeds for both, compared pair by
        pair), and its held-out pass rate must not fall. The shipped tasks, the default's,
        are where SmolLM2 passes almost nothing. At 2 samples that is 18 answers and 10
        graded ones from each checkpoint, about half a minute a round; at 4, 36 and 20 took
        55 s of a 140-second round (bench/RESULTS.md)."""
        if self.gate_eval_samples == 0:
            return [*self.learner, "--eval-prompts", "0"]
        return [*self.learner, "--eval-prompts", "4", "--eval-tasks", "held_out",
                "--eval-samples", str(self.gate_eval_samples)]  # fmt: skip

    @property
    def sampling(self) -> SamplingParams:
        return SamplingParams(max_tokens=self.max_tokens, temperature=self.temperature,
                              stop=self.stop)  # fmt: skip


@dataclass(frozen=True)
class Outcome:
    """One interaction of a text user, from the answer to the reaction."""

    answer: Answer
    task: Task
    turn: Turn
    graded: Grade | None  # None: no Python code to grade
    reaction: Reaction
    user_id: str = ""  # whose interaction it was (the stamp's ``user_id``)

    @property
    def passed(self) -> bool:
        return self.graded is not None and self.graded.passed


def answer_and_react(client: Emitter, answer: Answer, task: Task, react: React,
                     fields: dict[str, Any], later: Later,
                     harness: Harness | None = None) -> Outcome:  # fmt: skip
    """Read ``answer`` with the harness, grade its code with ``task``'s hidden cases, react,
    and report through ``client`` stamped with the interaction and checkpoint the gateway
    named and ``fields``; what the user does on the second look is appended to ``later``."""
    turn = (harness or Harness()).read(answer.text)
    code = turn.code()
    graded = grade(code, task) if code else None
    reaction = react(turn, graded)
    stamp = {**fields, "checkpoint_id": answer.checkpoint_id}
    if answer.experiment:
        stamp["experiment"] = {"name": answer.experiment[0], "arm": answer.experiment[1]}
    for event in now_events(turn, reaction, answer.latency_ms, answer.output_tokens):
        client.emit(event.type, answer.interaction_id, event.payload, **stamp)
    for event in later_events(turn, reaction, round(LOOK_AGAIN_S)):
        later.append((event.type, answer.interaction_id, event.payload, stamp))
    return Outcome(answer, task, turn, graded, reaction, str(fields.get("user_id", "")))


def tally(outcomes: Sequence[Outcome]) -> Counter[str]:
    """What happened, counted: interactions, edits, passed, accepted, kept, reverted,
    dissatisfied, no_code, invalid_tool_calls."""
    out: Counter[str] = Counter()
    for o in outcomes:
        r = o.reaction
        out.update(interactions=1, edits=bool(o.turn.edits), passed=o.passed,
                   accepted=bool(r.accepted), kept=bool(r.accepted) and not r.reverted,
                   reverted=r.reverted, dissatisfied=r.dissatisfied, no_code=o.graded is None,
                   invalid_tool_calls=any(not c.valid for c in o.turn.tool_calls))  # fmt: skip
    return out


def play_users(http: Any, client: Emitter, asks: Sequence[tuple[str, Task]],
               params: SamplingParams, react: React = by_rule, concurrency: int = 16,
               fields: Callable[[str], dict[str, Any]] | None = None,
               react_to: Callable[[Answer], React] | None = None) -> list[Outcome]:  # fmt: skip
    """Every ``(user_id, task)`` asks the gateway (``concurrency`` at a time: it batches them),
    reads, grades and reacts; the second looks are reported ``LOOK_AGAIN_S`` after the last
    answer. ``fields``: a user's stamp (default: the user and a session of their own);
    ``react_to``: the rule for each answer, where it depends on the answer's form (default:
    ``react`` for all)."""
    answers = ask_all(http, [(u, t.prompt) for u, t in asks], params, concurrency, text=True)
    harness, outcomes = Harness(), []
    later = Later(client)
    for (user_id, task), answer in zip(asks, answers, strict=True):
        stamp = fields(user_id) if fields else {"user_id": user_id, "session_id": f"s_{user_id}"}
        rule = react_to(answer) if react_to else react
        outcomes.append(answer_and_react(client, answer, task, rule, stamp, later, harness))
    later.drain()
    return outcomes


def round_asks(
    users: int, seed: int, tasks: Sequence[Task] | None = None
) -> list[tuple[str, Task]]:
    """``users`` users of a round, each asking for one task drawn from ``tasks`` (default: the
    easy ones, never a held-out one).

    >>> [(u, t.function) for u, t in round_asks(2, 1)]
    [('u_code0000', 'is_even'), ('u_code0001', 'count_a')]
    """
    rng = random.Random(seed)
    pool = tuple(tasks or load_tasks("easy"))
    return [(f"u_code{n:04d}", rng.choice(pool)) for n in range(users)]


@dataclass(frozen=True)
class PassRate:
    """A checkpoint's pass rate on the held-out tasks: ``passed`` of ``n`` answers."""

    passed: int
    n: int

    @property
    def rate(self) -> float:
        return self.passed / self.n if self.n else 0.0


def rate_text(rate: PassRate | None) -> str:
    """A pass rate and its counts, "-" when not measured.

    >>> rate_text(PassRate(3, 40)), rate_text(None)
    ('0.075 (3/40)', '-')
    """
    return "-" if rate is None else f"{rate.rate:.3f} ({rate.passed}/{rate.n})"


def held_out_pass_rate(policy: Sampler, params: SamplingParams, samples: int,
                       seed: int) -> PassRate:  # fmt: skip
    """``samples`` answers per held-out task, graded by the sandbox (``release.task_evals``):
    the same prompts and seeds for every checkpoint."""
    from release.task_evals import task_passes

    passes = task_passes(policy, params, samples, seed, load_tasks("held_out"))
    return PassRate(sum(passes), len(passes))
