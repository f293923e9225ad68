"""Shared pieces of the gateway's tests: `rtrl serve` as a child process (the real command, on
the tiny model), an API key, a LoRA checkpoint, the gateway's metrics as numbers, and the
rollouts on Kafka."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import torch

from checkpoints.record import CheckpointInfo, TrainingRef
from checkpoints.store import CheckpointRegistry
from checkpoints.weights import load_policy, register_base, weight_writers
from infra.api_keys import KeyStore
from models.loading import LoraSettings, with_lora
from models.rollout import Rollout
from tests.support.kafka import drain, free_port_block

REPO = Path(__file__).resolve().parents[2]


def api_key(db: Path, org: str = "acme") -> str:
    store = KeyStore(db)
    try:
        return store.create(org)
    finally:
        store.close()


class Serve:
    """`rtrl serve ARGS` on a free port (and a metrics port), stopped with SIGTERM."""

    def __init__(self, args: list[str], log: Path, env: dict[str, str] | None = None,
                 wait: bool = True) -> None:  # fmt: skip
        self.port = free_port_block(2)
        self.metrics_port = self.port + 1
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        self._out = open(log, "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "rtrl.cli",
                "serve",
                "--port",
                str(self.port),
                "--metrics-port",
                str(self.metrics_port),
                *args,
            ],
            cwd=REPO,
            stdout=self._out,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
        )
        if wait:
            self.wait_ready()

    def wait_ready(self, timeout_s: float = 120) -> None:
        """Until /readyz answers 200 (the model is loaded); a process that exits says why."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                if httpx.get(f"{self.url}/readyz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"rtrl serve did not come up:\n{self.log.read_text()[-3000:]}")

    def metrics(self) -> dict[str, float]:
        """Every sample of /metrics as ``name{labels}`` -> value."""
        text = httpx.get(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5).text
        out = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                out[name] = float(value)
        return out

    def metrics_when(self, name: str, value: float, timeout_s: float = 10.0) -> dict[str, float]:
        """/metrics once ``name`` has reached ``value`` (or the timeout passed): the recorder's
        thread builds, counts and hands over what was put aside up to 200 ms after the answer
        (``serving.rollouts.recorder``), so a count read right after an answer may be one short."""
        deadline = time.monotonic() + timeout_s
        while True:
            counts = self.metrics()
            if counts.get(name, 0.0) >= value or time.monotonic() > deadline:
                return counts
            time.sleep(0.05)

    def stop(self, timeout_s: float = 60) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait(10)
        self._out.close()
        return code


def rollouts(bootstrap: str, topic: str, expected: int | None,
             timeout: float = 60) -> dict[str, Rollout]:  # fmt: skip
    """The rollouts on ``topic`` by interaction id: ``expected`` of them, or (None) all that
    came until the topic was quiet for 3 s."""
    got = drain(bootstrap, topic, expected, timeout=timeout)
    out = {}
    for message in got:
        rollout = Rollout.from_json(message.value())
        assert message.key() == rollout.interaction_id.encode()
        out[rollout.interaction_id] = rollout
    return out


def register_lora(registry: CheckpointRegistry, checkpoint_id: str, parent: str,
                  seed: int) -> CheckpointInfo:  # fmt: skip
    """A LoRA checkpoint over the root's base whose adapter is seeded noise (a fresh adapter
    changes nothing: its B matrices start at zero)."""
    root = registry.get(parent)
    settings = LoraSettings(r=4, alpha=8)
    policy = load_policy(registry, root)
    policy.model = with_lora(policy.model, settings)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in policy.model.named_parameters():
            if "lora_" in name:
                p.copy_(0.3 * torch.randn(p.shape, generator=generator))
    weights, files = weight_writers(policy, settings, None)
    return registry.register(
        checkpoint_id=checkpoint_id,
        parent=parent,
        model=root.model,
        weights=weights,
        training=TrainingRef(),
        files=files,
        evals={},
        batches=(),
        status="promoted",
    )


def serve_tiny(tmp: Path, tiny_model: Path, *args: str) -> tuple[Serve, str]:
    """`rtrl serve` on the tiny model (its own registry and key store in ``tmp``; nothing
    recorded or followed) and an API key for it."""
    registry = CheckpointRegistry(tmp / "ckpt")
    register_base(registry, "t-0000", tiny_model)
    key = api_key(tmp / "keys.sqlite")
    command = ["--registry", str(registry.root), "--db", str(tmp / "keys.sqlite"), "--no-record",
               "--no-follow", *args]  # fmt: skip
    return Serve(command, tmp / "serve.log"), key
