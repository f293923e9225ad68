"""The Python SDK as its own distribution (ingest/sdk-py, rtrl-sdk): a fresh virtualenv with
only it installed emits to the real collector, and nothing heavy came along."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from tests.support.collector import ORG, REPO, CollectorHandle, drain_until

HEAVY = {"torch", "confluent-kafka", "polars"}
N = 20

EMIT = """
import json, sys
from ingest.sdk import Client, SdkConfig
import ingest.sdk
try:
    import ingest.collector
    has_collector = True
except ImportError:
    has_collector = False
client = Client(SdkConfig(endpoint=sys.argv[1], api_key=sys.argv[2], org_id=sys.argv[3],
                          flush_interval_s=0.05))
statuses = [client.emit("interaction.started", f"dist-{i}", {"mode": "agent"}, session_id="s",
                        user_id="u", checkpoint_id="c") for i in range(int(sys.argv[4]))]
left = client.close(30)
print(json.dumps({"left": left, "sent": client.counters().sent, "file": ingest.sdk.__file__,
                  "has_collector": has_collector, "statuses": sorted(set(statuses))}))
"""


def _name(requirement: str) -> str:
    return requirement.split("==")[0].split("[")[0].strip().lower()


def test_the_distribution_pins_what_the_platform_pins() -> None:
    dist = tomllib.loads((REPO / "ingest" / "sdk-py" / "pyproject.toml").read_text())
    platform = tomllib.loads((REPO / "pyproject.toml").read_text())
    pins = {_name(r): r for r in platform["project"]["dependencies"]}
    for requirement in dist["project"]["dependencies"]:
        assert pins[_name(requirement)] == requirement


def test_a_fresh_venv_with_only_rtrl_sdk_emits_to_the_collector(
    collector: CollectorHandle, kafka_bootstrap: str, tmp_path: Path
) -> None:
    # Built from a copy, so no build/ or egg-info lands in the repository's tree.
    source = tmp_path / "src" / "ingest"
    skip = shutil.ignore_patterns("__pycache__", "build", "*.egg-info")
    for part in ("sdk-py", "sdk", "contract"):
        shutil.copytree(REPO / "ingest" / part, source / part, ignore=skip)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    subprocess.run(
        [python, "-m", "pip", "install", "--quiet", str(source / "sdk-py")], check=True, timeout=600
    )
    listed = subprocess.run(
        [python, "-m", "pip", "list", "--format", "json"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    installed = {p["name"].lower().replace("_", "-") for p in json.loads(listed)}
    print("installed:", sorted(installed))
    assert "rtrl-sdk" in installed and {"httpx", "orjson", "msgspec"} <= installed
    assert not installed & HEAVY, installed & HEAVY
    assert "rtrl" not in installed and len(installed) < 20

    run = subprocess.run(
        [python, "-c", EMIT, collector.url, collector.key, ORG, str(N)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    answer = json.loads(run.stdout)
    assert answer["file"].startswith(str(venv))  # the installed copy, not the repository's
    assert answer["has_collector"] is False  # the SDK and the contract only
    assert answer["statuses"] == ["queued"] and answer["left"] == 0 and answer["sent"] == N
    events = drain_until(
        kafka_bootstrap,
        collector.names.events,
        lambda got: len({e["interaction_id"] for e in got}) >= N,
    )
    assert {e["interaction_id"] for e in events} == {f"dist-{i}" for i in range(N)}
