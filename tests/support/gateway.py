"""Shared pieces of the gateway's tests: `rtrl serve` as a child process (the real command, on
the tiny model), an API key, a LoRA checkpoint, the gateway's metrics as numbers, and the
rollouts on Kafka."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import torch

from checkpoints.record import CheckpointInfo, TrainingRef
from checkpoints.store import CheckpointRegistry
from checkpoints.weights import load_policy, register_base, weight_writers
from infra.api_keys import KeyStore
from models.loading import LoraSettings, with_lora
from models.rollout import Rollout
from tests.support.child import answers, start_rtrl, stop
from tests.support.kafka import drain, free_port_block


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
        ports = ["--port", str(self.port), "--metrics-port", str(self.metrics_port)]
        self.proc, self._out = start_rtrl(["serve", *ports, *args], log, env)
        if wait:
            self.wait_ready()

    def wait_ready(self, timeout_s: float = 120) -> None:
        """Until /readyz answers 200 (the model is loaded); a process that exits says why."""
        if not answers(self.proc, f"{self.url}/readyz", timeout_s, pause_s=0.2):
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
        return stop(self.proc, self._out, timeout_s)


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


def tiny_registry(root: Path, tiny_model: Path) -> CheckpointRegistry:
    """A registry at ``root`` whose one checkpoint, the root ``t-0000``, is ``tiny_model``."""
    registry = CheckpointRegistry(root)
    register_base(registry, "t-0000", tiny_model)
    return registry


@dataclass(frozen=True)
class RecordTo:
    """Where a test's gateway records its rollouts: a broker and the prefix of its topics."""

    bootstrap: str
    topic_prefix: str


def serve_tiny(tmp: Path, tiny_model: Path, *args: str,
               record_to: RecordTo | None = None) -> tuple[Serve, str]:  # fmt: skip
    """`rtrl serve ARGS` on the tiny model (or a copy of it), its own registry and key store in
    ``tmp``, never following the registry, recording nothing unless ``record_to`` says where;
    and an API key for it."""
    registry = tiny_registry(tmp / "ckpt", tiny_model)
    key = api_key(tmp / "keys.sqlite")
    recording = (["--bootstrap", record_to.bootstrap, "--topic-prefix", record_to.topic_prefix]
                 if record_to else ["--no-record"])  # fmt: skip
    command = ["--registry", str(registry.root), "--key-db", str(tmp / "keys.sqlite"), *recording,
               "--no-follow", *args]  # fmt: skip
    return Serve(command, tmp / "serve.log"), key


@dataclass(frozen=True)
class ServedSetup:
    """What sets a test module's ``served`` gateway apart (``tests/conftest.py``): its
    `rtrl serve` options, its model (None: the tiny model), where it records. The default
    setup is the session's one shared gateway."""

    options: tuple[str, ...] = ()
    model: Path | None = None
    record_to: RecordTo | None = None
