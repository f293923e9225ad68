"""`rtrl run`'s defaults: the code world on SmolLM2 served by llama.cpp is what `make run` shows;
the token world (the tiny model, its reward-hack scenarios) is one option away."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from rtrl.cli import build_parser
from rtrl.run.options import RUN_OPTIONS, run_settings
from rtrl.run.settings import RunPlan, RunSettings
from rtrl.worlds.code_world import CodeWorldSettings
from tests.support.settings_options import assert_every_field_is_an_option, subcommand

ROOT = Path(__file__).resolve().parents[2]


def resolved(*argv: str) -> RunPlan:
    return run_settings(build_parser().parse_args(["run", *argv])).plan()


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
    assert args.settings.engine_exact  # the rollouts' log-probs are the learner's own
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


def test_every_run_setting_is_an_option():
    assert_every_field_is_an_option(subcommand("run"), RUN_OPTIONS)


def test_no_options_are_the_settings_defaults_and_the_world_fills_the_rest():
    settings = run_settings(build_parser().parse_args(["run"]))
    assert settings == RunSettings()
    assert (settings.world, settings.rounds, settings.extra_rounds) == (None, None, None)
    plan = settings.plan()
    assert (plan.world, plan.rounds, plan.extra_rounds) == ("code", 2, 1)


@pytest.mark.parametrize(("argv", "extra"), [(["--world", "code", "--extra-rounds", "0"], 0),
                                             (["--world", "tokens", "--extra-rounds", "2"], 2),
                                             (["--world", "agent"], 0)])  # fmt: skip
def test_an_explicit_extra_rounds_wins_over_the_world(argv, extra):
    assert resolved(*argv).extra_rounds == extra


def test_the_orgs_world_is_the_code_worlds_users_and_sizes_in_three_organisations():
    plan = resolved("--world", "orgs")
    assert (plan.model, plan.engine, plan.rounds, plan.extra_rounds) == (
        "smollm2-135m", "llama.cpp", 2, 0)  # fmt: skip
    code = CodeWorldSettings()
    assert (plan.round_users, plan.ab_users) == (code.round_users, code.ab_users)


def test_a_negative_extra_rounds_is_refused():
    with pytest.raises(SystemExit, match="--extra-rounds: 0 or more"):
        resolved("--extra-rounds", "-1")


@pytest.mark.parametrize(("argv", "refusal"), [
    (["--scenario", "agent", "--users", "indifferent"], "brings its own users: no --users"),
    (["--world", "code", "--users", "indifferent"], "--world code brings its own users"),
    (["--world", "tokens", "--ab-compare-servers"], "--ab-compare-servers compares"),
    (["--model", "tiny"], "serves GGUF-convertible models"),
    (["--world", "tokens", "--scenario", "tool-avoidance"], "use --world agent"),
    (["--world", "agent", "--scenario", "free-deferral"], "--world agent brings its own users"),
    (["--world", "agent", "--scenario", "tool-avoidance"], None),
    (["--world", "orgs", "--ab-compare-servers"], "not with --world orgs"),
    (["--world", "orgs", "--users", "indifferent"], "--world orgs brings its own users"),
    (["--world", "orgs", "--extra-rounds", "1"], "no --extra-rounds"),
    (["--world", "orgs"], None),
    ([], None),
])  # fmt: skip
def test_what_cannot_be_played_is_said(argv, refusal):
    said = resolved(*argv).refusal()
    assert said == refusal if refusal is None else refusal in said


def test_the_gateways_engine_options():
    assert resolved("--world", "tokens").serve_args() == []
    assert resolved().serve_args() == ["--engine", "llama.cpp", "--engine-slots", "16",
                                       "--engine-exact"]  # fmt: skip
    assert resolved("--world", "agent", "--no-engine-exact").serve_args() == [
        "--engine", "llama.cpp", "--engine-slots", "4"]  # fmt: skip


@pytest.mark.parametrize(("scenario", "reward"), [("tool-avoidance", "default"),
                                                  ("tool-avoidance-control", "agent")])  # fmt: skip
def test_the_avoidance_scenarios_are_unconstrained_agent_runs_under_their_reward(scenario, reward):
    plan = resolved("--world", "agent", "--scenario", scenario)
    assert (plan.world, plan.reward_config, plan.agent.constrained) == ("agent", reward, False)
    assert resolved("--scenario", scenario).world == "agent"  # the scenario's world
    named = resolved("--world", "agent", "--scenario", scenario, "--reward-config", "x.toml")
    assert named.reward_config == "x.toml"  # what the options name wins
    assert resolved("--world", "agent").agent.constrained  # the world's own runs: constrained
