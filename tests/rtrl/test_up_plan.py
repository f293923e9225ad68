"""`rtrl up`'s plan: its gateway and its trainer get options their commands take, and on
llama.cpp the gateway serves the learner's own weights, so that the trainer's recipe can take
the recorded log-probabilities as its pi_old (the mismatch check decides each round)."""

from __future__ import annotations

import argparse
import os
import shlex
from pathlib import Path

from rtrl.cli import build_parser
from rtrl.up_plan import UpSettings, service_commands, supervisord_conf
from trainer.learner_cli import learner_from


def _parsed(args: list[str]) -> argparse.Namespace:
    parsed, unknown = build_parser().parse_known_args(args)
    assert unknown == [], unknown
    return parsed


def test_the_gateway_serves_exact_weights_and_the_trainer_may_skip_its_scoring() -> None:
    settings = UpSettings()
    commands = service_commands(settings)
    assert settings.engine == "llama.cpp" and "--engine-exact" in commands["gateway"]
    assert _parsed(commands["gateway"]).engine_exact is True
    learner = learner_from(_parsed(commands["trainer"]))
    assert learner.exact_behaviour_kl == 1e-4 and learner.mismatch_sample > 0


def test_the_4_bit_file_is_one_option_away_and_transformers_takes_none() -> None:
    four_bit = service_commands(UpSettings(engine_exact=False))["gateway"]
    assert "--engine" in four_bit and "--engine-exact" not in four_bit
    local = service_commands(UpSettings(engine="transformers"))["gateway"]
    assert "--engine" not in local and "--engine-exact" not in local
    recipe = shlex.split(UpSettings().train_args)
    assert recipe[recipe.index("--exact-behaviour-kl") + 1] == "0.0001"


def test_the_gateway_and_the_trainer_share_the_cores_instead_of_each_taking_them_all(
    tmp_path: Path,
) -> None:
    conf = supervisord_conf(UpSettings(data_dir=tmp_path), ["rtrl"], tmp_path / "rtrl.toml")
    caps: dict[str, int] = {}
    for section in conf.split("[program:")[1:]:
        name = section.split("]", 1)[0]
        for line in section.splitlines():
            if line.startswith("environment = OMP_NUM_THREADS="):
                caps[name] = int(line.split("=", 2)[2].strip('"'))
    assert caps.keys() == {"gateway", "trainer"}, conf
    cores = os.cpu_count() or 1
    assert all(n >= 1 for n in caps.values()) and sum(caps.values()) <= max(cores, 2), caps
