"""`rtrl train`'s options are the fields of a round's settings (RoundOptions, LearnerConfig,
LoraSettings, GateConfig, CanaryConfig): a new field is an option or declared as given by the
command, each option reaches its field, and no option's default differs from its field's."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from infra.settings_cli import SettingsOptions
from infra.topics import TopicNames
from models.lora_settings import LoraSettings
from release.canary_config import CanaryConfig
from release.gate import GateConfig
from rewards.config import RewardConfig
from tests.support.settings_options import assert_every_field_is_an_option, parse, subcommand
from trainer.cli import CANARY_OPTIONS, GATE_OPTIONS, LORA_OPTIONS, ROUND_OPTIONS, round_options
from trainer.learner_cli import LEARNER_OPTIONS
from trainer.learner_config import LearnerConfig
from trainer.round_options import RoundOptions

OPTIONS = [ROUND_OPTIONS, LEARNER_OPTIONS, LORA_OPTIONS, GATE_OPTIONS, CANARY_OPTIONS]


@pytest.mark.parametrize("options", OPTIONS)
def test_every_field_is_an_option_of_rtrl_train(options: SettingsOptions) -> None:
    assert_every_field_is_an_option(subcommand("train"), options)


def test_the_defaults_are_the_settings_defaults() -> None:
    options = round_options(parse("train"))
    assert options == RoundOptions(
        registry=Path(".rtrl/checkpoints"), warehouse=Path(".rtrl/warehouse"),
        bootstrap=options.bootstrap, topics=TopicNames(), learner=LearnerConfig(),
        gate=GateConfig.for_reward(RewardConfig()),
    )  # fmt: skip
    assert (options.lora, options.canary, options.eval_engine) == (None, None, None)


def test_each_option_reaches_its_field() -> None:
    defaults = LearnerConfig()
    learner = {f.name: getattr(defaults, f.name) + 1 for f in dataclasses.fields(LearnerConfig)}
    learner["clip"] = learner["gate_kl_share"] = 0.5  # within (0, 1)
    argv = [arg for name, value in learner.items()
            for arg in (f"--{name.replace('_', '-')}", str(value))]  # fmt: skip
    options = round_options(parse(
        "train", "--registry", "reg", "--warehouse", "wh", "--catalog", "c.duckdb",
        "--checkpoint", "p-1", "--id", "p-9", "--device", "cpu", "--no-bf16", "--held-out",
        "0.5", "--thresholds", "t.toml", "--lora-r", "4", "--lora-alpha", "8", "--lora-targets",
        "q_proj,,k_proj", "--min-gain", "0.1", "--max-kl", "2", "--level", "0.9",
        "--eval-prompts", "3", "--eval-samples", "2", "--eval-reader", "m:f", "--eval-tasks",
        "easy", "--canary", "5", "--canary-users", "50", "--canary-margin", "0.2", "--publish",
        "--bootstrap", "k:9092", "--topic-prefix", "t.", *argv,
    ))  # fmt: skip
    assert options == RoundOptions(
        registry=Path("reg"), warehouse=Path("wh"), bootstrap="k:9092", topics=TopicNames("t."),
        learner=LearnerConfig(**learner),
        gate=GateConfig.for_reward(RewardConfig(), min_gain=0.1, max_kl=2.0, level=0.9,
                                   eval_prompts=3, eval_samples=2, eval_reader="m:f",
                                   eval_tasks="easy"),
        held_out=0.5, catalog=Path("c.duckdb"), checkpoint="p-1", candidate_id="p-9",
        thresholds=Path("t.toml"), publish=True, device="cpu", bf16=False,
        lora=LoraSettings(r=4, alpha=8, targets=("q_proj", "k_proj")),
        canary=CanaryConfig(percent=5, min_users=50, margin=0.2),
    )  # fmt: skip


@pytest.mark.parametrize(
    "argv", [["--lora-r", "0"], ["--canary-users", "0"], ["--device", "tpu"], ["--eval-tasks", "x"]]
)
def test_values_out_of_range_are_refused_by_the_parser(argv: list[str]) -> None:
    with pytest.raises(SystemExit):
        parse("train", *argv)
