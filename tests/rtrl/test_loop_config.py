"""The one configuration: a TOML file whose settings are the defaults of the options that name
them in every command, an option given still winning; a setting that cannot work refused before
any command runs, with its reason; the file's [reward] and [monitors] tables read by the
commands that take a reward configuration or thresholds."""

from __future__ import annotations

from pathlib import Path

import pytest

from rewards.config import load_config
from rewards.monitors import MonitorThresholds, load_thresholds
from rtrl.cli import build_parser, main, parse_args
from rtrl.loop_config import LoopConfig, load_loop_config

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "rtrl.example.toml"
OPERATIONS = EXAMPLE.parent / "operations.md"


def _parse(*argv: str, env: dict[str, str] | None = None):  # noqa: ANN202
    return parse_args(build_parser(), list(argv), env or {})


def test_each_setting_reaches_the_options_that_name_it() -> None:
    config = ["--config", str(EXAMPLE)]
    build = _parse(*config, "batches", "build")
    assert (build.settle_s, build.min_rows, build.root) == (605, 32, ".rtrl/warehouse")
    train = _parse(*config, "train")
    assert (train.min_examples, train.min_users, train.eval_engine_threads) == (50, 10, 1)
    assert Path(train.reward_config) == EXAMPLE and Path(train.thresholds) == EXAMPLE
    serve = _parse(*config, "serve")
    assert serve.engine_threads == 1 and str(serve.key_db) == ".rtrl/keys.sqlite"
    assert _parse(*config, "stream", "worker").bootstrap == "127.0.0.1:9092"


def test_an_option_given_wins_and_the_environment_names_the_file() -> None:
    by_env = _parse("batches", "build", "--settle-s", "900", env={"RTRL_CONFIG": str(EXAMPLE)})
    assert by_env.settle_s == 900 and by_env.min_rows == 32
    assert _parse("batches", "build").settle_s == 1805  # no configuration: the command's own


def test_the_file_is_the_reward_configuration_and_the_thresholds() -> None:
    reward = load_config(EXAMPLE)
    assert (reward.window_s, reward.late_s, reward.grace_s) == (600, 600, 5)
    monitors = load_loop_config(EXAMPLE).monitors
    assert load_thresholds(EXAMPLE) == MonitorThresholds.model_validate(monitors)
    assert load_thresholds(EXAMPLE).tool_call_rate.relative == 0.25


def test_a_settle_time_shorter_than_the_late_window_is_refused_at_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "rtrl.toml"
    bad.write_text("[reward]\nlate_s = 600\ngrace_s = 5\n\n[batches]\nsettle_s = 60\n")
    assert main(["--config", str(bad), "batches", "list"]) == 2
    err = capsys.readouterr().err
    assert "settle_s 60 is shorter than the reward's late_s + grace_s (605)" in err
    bad.write_text("[batches]\nsettle_s = 60\nsettle = 1\n")
    assert main(["--config", str(bad), "batches", "list"]) == 2
    assert "batches.settle: Extra inputs are not permitted" in capsys.readouterr().err
    bad.write_text("[monitors]\nalpha = 2\n")  # the thresholds' own limits, at start too
    assert main(["--config", str(bad), "batches", "list"]) == 2
    assert "alpha: Input should be less than 0.5" in capsys.readouterr().err


def test_threads_that_oversubscribe_the_cores_are_warned() -> None:
    config = LoopConfig.model_validate(
        {"serving": {"engine_threads": 2}, "trainer": {"eval_engine_threads": 2}}
    )
    assert "4 threads on 2 cores" in config.warnings(cores=2)[0]
    assert config.warnings(cores=4) == []


def test_the_example_and_operations_md_name_every_setting() -> None:
    text, example = OPERATIONS.read_text(), EXAMPLE.read_text()
    for section, model in LoopConfig.model_fields.items():
        assert f"[{section}]" in text, section
        fields = getattr(model.annotation, "model_fields", {})
        if section in ("reward", "monitors"):
            continue  # their own modules' fields, documented there
        for name in fields:
            assert f"`{name}`" in text and name in example, (section, name)
