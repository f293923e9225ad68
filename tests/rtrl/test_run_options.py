"""`rtrl run`'s defaults: the code world on SmolLM2 served by llama.cpp is what `make run` shows;
the token world (the tiny model, its reward-hack scenarios) is one option away."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from rtrl.cli import build_parser
from rtrl.run.options import with_world_defaults
from rtrl.worlds.code_world import CodeWorldSettings

ROOT = Path(__file__).resolve().parents[2]


def resolved(*argv: str):
    args = build_parser().parse_args(["run", *argv])
    with_world_defaults(args)
    return args


def make_run_argv() -> list[str]:
    """The options `make run` passes to `rtrl run`, read from the Makefile's recipe."""
    lines = (ROOT / "Makefile").read_text().splitlines()
    recipe = lines[next(n for n, line in enumerate(lines) if line.startswith("run:")) + 1]
    words = shlex.split(recipe)
    return words[words.index("run") + 1 :]


def test_make_run_is_the_code_world_on_smollm2_through_llama_cpp():
    args = resolved(*make_run_argv())
    code = CodeWorldSettings()
    assert (args.world, args.model, args.engine) == ("code", "smollm2-135m", "llama.cpp")
    assert (args.rounds, args.round_users, args.ab_users) == (
        code.rounds,
        code.round_users,
        code.ab_users,
    )
    assert args.engine_exact  # the rollouts' log-probs are the learner's own
    # a run that promoted nothing in its rounds plays one more before the closing A/B
    assert args.extra_rounds == code.extra_rounds == 1


@pytest.mark.parametrize("argv", [["--world", "tokens"], ["--scenario", "free-deferral"],
                                  ["--users", "indifferent"]])  # fmt: skip
def test_the_token_world_keeps_the_tiny_model(argv):
    args = resolved(*argv)
    assert (args.world, args.model, args.engine) == ("tokens", "tiny", "transformers")
    assert (args.rounds, args.round_users, args.ab_users) == (3, 1000, 1000)
    assert args.extra_rounds == 0


def test_what_the_options_name_wins_over_the_world():
    args = resolved("--model", "tiny", "--engine", "transformers", "--rounds", "1",
                    "--round-users", "12")  # fmt: skip
    assert (args.world, args.model, args.engine, args.rounds, args.round_users) == (
        "code",
        "tiny",
        "transformers",
        1,
        12,
    )
    agent = resolved("--world", "agent")
    assert (agent.model, agent.engine, agent.rounds) == ("smollm2-135m", "llama.cpp", 3)
