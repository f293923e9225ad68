"""`rtrl serve`'s options are the fields of its settings (ServeConfig, GatewayConfig and, for
``--engine llama.cpp``, EngineSettings): a new field is an option or declared as given by the
command, each option reaches its field, and no option's default differs from its field's."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra.api_keys import DEFAULT_KEY_DB
from infra.settings_cli import SettingsOptions
from llamacpp.cli import ENGINE_OPTIONS
from llamacpp.fleet import EngineSettings
from serving.cli import GATEWAY_OPTIONS, SERVE_OPTIONS, serve_config
from serving.completions import GatewayConfig
from serving.serve_config import UPSTREAM_KEY_ENV, ServeConfig
from tests.support.settings_options import (
    assert_every_field_is_an_option,
    loaded_by_the_command_line,
    parse,
    subcommand,
)

BUILT = {"binary": Path("llama-server"), "cache_root": Path("cache"), "log_dir": Path("logs")}


@pytest.mark.parametrize("options", [SERVE_OPTIONS, GATEWAY_OPTIONS, ENGINE_OPTIONS])
def test_every_field_is_an_option_of_rtrl_serve(options: SettingsOptions) -> None:
    assert_every_field_is_an_option(subcommand("serve"), options)


def test_the_defaults_are_the_settings_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(UPSTREAM_KEY_ENV, raising=False)
    args = parse("serve")
    config = serve_config(args)
    assert config == ServeConfig(registry=Path(".rtrl/checkpoints"), checkpoint=None,
                                 key_db=DEFAULT_KEY_DB, bootstrap=config.bootstrap)  # fmt: skip
    assert ENGINE_OPTIONS.read(args, **BUILT) == EngineSettings(**BUILT)
    assert parse("serve", "--db", "k.db").key_db == Path("k.db")  # --key-db's older name


def test_each_option_reaches_its_field(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(UPSTREAM_KEY_ENV, "sk-up")
    args = parse(
        "serve", "--registry", "reg", "--checkpoint", "c-1", "--key-db", "keys.db", "--host",
        "0.0.0.0", "--port", "8100", "--metrics-port", "9100", "--upstream", "http://up:8000",
        "--upstream-model", "base", "--upstream-kind", "openai", "--adapter-dir", "ad",
        "--device", "cuda", "--max-batch", "4", "--batch-wait-ms", "250", "--spool-max", "7",
        "--no-record", "--no-follow", "--seed", "3", "--bootstrap", "k:9092", "--topic-prefix",
        "t.", "--max-tokens", "64", "--hide-logprobs", "--served-model-name", "a", "b",
        "--engine-threads", "3", "--engine-slots", "5", "--engine-outtype", "q8_0",
        "--engine-exact", "--engine-gguf-dir", "gguf", "--engine-drain-s", "1.5",
    )  # fmt: skip
    assert serve_config(args) == ServeConfig(
        registry=Path("reg"), checkpoint="c-1", key_db=Path("keys.db"), bootstrap="k:9092",
        topic_prefix="t.", host="0.0.0.0", port=8100, metrics_port=9100,
        upstream="http://up:8000", upstream_model="base", upstream_api_key="sk-up",
        upstream_kind="openai", adapter_dir=Path("ad"), device="cuda", max_batch=4,
        batch_wait_s=0.25, spool_max=7, record=False, follow=False, seed=3,
        gateway=GatewayConfig(default_max_tokens=64, hide_logprobs=True, model_names=("a", "b")),
    )  # fmt: skip
    assert ENGINE_OPTIONS.read(args, **BUILT) == EngineSettings(
        **BUILT, threads=3, slots=5, outtype="q8_0", exact=True, converted_dir=Path("gguf"),
        drain_timeout_s=1.5,
    )  # fmt: skip


@pytest.mark.parametrize(
    "argv", [["--max-batch", "0"], ["--engine-threads", "0"], ["--upstream-kind", "vllm"]]
)
def test_values_out_of_range_are_refused_by_the_parser(argv: list[str]) -> None:
    with pytest.raises(SystemExit):
        parse("serve", *argv)


def test_the_options_load_neither_the_web_server_nor_the_llamacpp_runtime() -> None:
    modules = ("serving.server", "uvicorn", "fastapi", "llamacpp.fleet", "llamacpp.convert")
    assert loaded_by_the_command_line(*modules) == []
