"""docker-compose.yml and the Dockerfile, checked without Docker: structure, KRaft, commands.

Every platform service's command must be a real ``rtrl`` invocation: it is parsed with the
CLI's own parser; a subcommand that the console script does not have fails the test.
"""

from __future__ import annotations

import base64
import importlib.util
import re
import tomllib
from pathlib import Path

import pytest
import yaml

from infra.settings import BOOTSTRAP_ENV
from rtrl.loop_config import load_loop_config
from rtrl.up_plan import UpSettings, service_commands
from tests.infra.infra_probe import rtrl_subcommands

REPO = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((REPO / "docker-compose.yml").read_text())
SERVICES: dict[str, dict] = COMPOSE["services"]
# the services without a model (the services image) and those with one (the model image)
PLATFORM = ("collector", "stream", "sink", "batches", "console")
MODEL = ("setup", "trainer", "gateway", "canary")
LONG_RUNNING = ("collector", "stream", "sink", "batches", "trainer", "gateway", "canary",
                "console")  # fmt: skip
DOCKERFILE = (REPO / "Dockerfile").read_text()


def _requirements_module():
    spec = importlib.util.spec_from_file_location(
        "image_requirements", REPO / "docker" / "requirements.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_service_has_an_image_or_a_build():
    for name, svc in SERVICES.items():
        assert svc.get("image") or svc.get("build"), name


def test_kafka_is_the_official_image_in_kraft_mode():
    kafka = SERVICES["kafka"]
    assert kafka["image"] == "apache/kafka:4.1.1"
    env = kafka["environment"]
    assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"
    assert env["KAFKA_CONTROLLER_QUORUM_VOTERS"] == f"{env['KAFKA_NODE_ID']}@kafka:9093"
    assert "CONTROLLER" in env["KAFKA_LISTENERS"] and "PLAINTEXT://:9092" in env["KAFKA_LISTENERS"]
    assert "PLAINTEXT://kafka:9092" in env["KAFKA_ADVERTISED_LISTENERS"]
    assert str(env["KAFKA_AUTO_CREATE_TOPICS_ENABLE"]).lower() == "false"
    assert not any("zookeeper" in name.lower() for name in SERVICES)
    assert not any("ZOOKEEPER" in k for k in env)
    # A KRaft cluster id is 16 bytes in URL-safe base64 without padding.
    cluster_id = env["CLUSTER_ID"]
    assert len(cluster_id) == 22 and len(base64.urlsafe_b64decode(cluster_id + "==")) == 16


def test_depends_on_names_defined_services_with_valid_conditions():
    conditions = {"service_started", "service_healthy", "service_completed_successfully"}
    for name, svc in SERVICES.items():
        deps = svc.get("depends_on", {})
        for dep, how in deps.items() if isinstance(deps, dict) else ((d, {}) for d in deps):
            assert dep in SERVICES and dep != name, f"{name} depends on {dep}"
            assert how.get("condition", "service_started") in conditions
            if how.get("condition") == "service_healthy":
                assert "healthcheck" in SERVICES[dep], f"{dep} has no healthcheck"
    assert SERVICES["setup"]["depends_on"]["kafka"]["condition"] == "service_healthy"


@pytest.mark.parametrize("name", PLATFORM + MODEL)
def test_every_service_reads_the_one_configuration_and_waits_for_the_setup(name):
    svc = SERVICES[name]
    assert svc["environment"][BOOTSTRAP_ENV] == "kafka:9092"
    assert svc["environment"]["RTRL_CONFIG"] == "/config/rtrl.toml"
    assert "./docker/rtrl.toml:/config/rtrl.toml:ro" in svc["volumes"]
    if name != "setup":
        assert svc["depends_on"]["setup"]["condition"] == "service_completed_successfully"
    # one image, built from one definition, for every service without a model; one with
    target = "services" if name in PLATFORM else "model"
    assert svc["build"] == {"context": ".", "target": target}
    assert svc["image"] == f"rtrl:{target}"


def test_the_configuration_is_valid_and_names_the_shared_volume():
    config = load_loop_config(REPO / "docker" / "rtrl.toml")
    assert config.kafka.bootstrap == "kafka:9092"
    for path in (config.paths.warehouse, config.paths.registry, config.paths.key_db):
        assert path is not None and path.startswith("/data/")


def test_compose_runs_the_services_rtrl_up_runs_with_the_same_commands():
    planned = service_commands(UpSettings())
    assert set(SERVICES) == {"kafka", "setup", *planned}
    for name, args in planned.items():
        command = SERVICES[name]["command"]
        subcommand = args[:2] if args[1].isalpha() else args[:1]
        assert command[1 : 1 + len(subcommand)] == subcommand, name
    assert SERVICES["setup"]["command"][:3] == ["rtrl", "up", "--first-steps-only"]


def test_the_services_image_has_no_torch_and_the_model_image_a_cpu_one():
    requirements = _requirements_module()
    dependencies = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    services, model = requirements.split(dependencies)
    assert sorted(services + model) == sorted(dependencies)  # each in exactly one image
    assert "torch" not in {requirements.name_of(d) for d in services}
    assert "torch" in {requirements.name_of(d) for d in model}
    stages = {name: base for base, name in re.findall(r"^FROM (\S+) AS (\S+)$", DOCKERFILE, re.M)}
    assert stages == {"services": "python:3.11-slim", "model": "services"}
    services_stage, model_stage = DOCKERFILE.split("FROM services AS model")
    assert (
        "requirements.py services" in services_stage and "pip install . --no-deps" in services_stage
    )
    assert "requirements.py model" in model_stage
    assert f"--index-url {requirements.CPU_TORCH_INDEX}" in model_stage
    trainer = SERVICES["trainer"]
    assert trainer["build"]["target"] == "model" and "profiles" not in trainer


@pytest.mark.parametrize("name", LONG_RUNNING)
def test_services_get_time_to_stop_cleanly(name):
    grace = SERVICES[name]["stop_grace_period"]
    assert re.fullmatch(r"\d+s", grace) and int(grace[:-1]) >= 30, grace


def test_the_collector_is_healthy_when_ready_and_serves_metrics_apart():
    svc = SERVICES["collector"]
    command = svc["command"]
    port = command[command.index("--port") + 1]
    probe = " ".join(svc["healthcheck"]["test"])
    assert f"http://127.0.0.1:{port}/readyz" in probe
    metrics = command[command.index("--metrics-port") + 1]
    assert metrics != port and f"{metrics}:{metrics}" in svc["ports"]


@pytest.mark.parametrize("name", PLATFORM + MODEL)
def test_platform_service_command_is_a_real_rtrl_subcommand(name):
    command = SERVICES[name]["command"]
    assert command[0] == "rtrl"
    parser, subcommands = rtrl_subcommands()
    assert command[1] in subcommands, f"`rtrl {command[1]}` is no subcommand: {sorted(subcommands)}"
    try:
        args = parser.parse_args(command[1:])
    except SystemExit:
        pytest.fail(f"`{' '.join(command)}` does not parse (argparse's message is above)")
    assert callable(args.func)


def test_collector_listens_beyond_loopback_on_its_published_port():
    svc = SERVICES["collector"]
    command = svc["command"]
    port = command[command.index("--port") + 1]
    assert command[command.index("--host") + 1] == "0.0.0.0"
    assert f"{port}:{port}" in svc["ports"]


def test_named_volumes_are_declared():
    declared = set(COMPOSE.get("volumes") or {})
    for name, svc in SERVICES.items():
        for volume in svc.get("volumes", []):
            source = volume.split(":", 1)[0]
            if not source.startswith((".", "/")):
                assert source in declared, f"{name} mounts undeclared volume {source}"


def test_dockerfile_installs_every_package_the_project_declares():
    dockerfile = DOCKERFILE
    assert re.search(r"^FROM python:3\.11-slim AS services$", dockerfile, re.M)
    assert re.search(r"pip install \.", dockerfile)
    copied = set(re.findall(r"^COPY (\S+?)/? ", dockerfile, re.M))
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    packages = {p.rstrip("*") for p in declared["packages"]["find"]["include"]}
    assert packages <= copied, f"not copied into the image: {packages - copied}"
    assert {d for d in packages if (REPO / d).is_dir()} == packages
    assert "pyproject.toml" in dockerfile and "README.md" in dockerfile  # pip needs the readme
