"""One llama-server for every LoRA checkpoint of a base: the followed checkpoint and an A/B's
two arms are served by a single server, each request choosing its adapter, and each arm's
log-probabilities are that arm's own as the learner scores them (per-token mismatch KL under
``KL_LIMIT`` nats, on the exact base), far from the other arms'. A checkpoint that joins them
moves them all to a new server while requests keep coming: none fails, and the old server stops
once drained.

Skipped only when the server binary is not built (``python -m llamacpp.build``).
"""

from __future__ import annotations

import asyncio
import copy
import threading
from pathlib import Path
from typing import Any

import pytest
import torch

from checkpoints.record import PROMOTED, TrainingRef, WeightsRef
from checkpoints.store import CheckpointRegistry
from checkpoints.weights import model_ref, weight_writers
from llamacpp.fleet import EngineFleet, EngineSettings
from models.catalog import fetch, models_dir
from models.generation import Generation
from models.loading import LoadedBase, LoraSettings, load_base, with_lora
from models.mismatch import mismatch
from models.policy import CausalLMPolicy
from models.rollout import Rollout
from models.sampling import SamplingParams
from serving.backends.llamacpp_engine import EngineBackend
from serving.rollouts.build import rollout_of
from serving.routing import CURRENT
from tests.support.backend_requests import chat_asked
from tests.support.engine import BINARY, CACHE, needs_engine, scored

pytestmark = needs_engine
KL_LIMIT = 1e-3  # nats a token between the engine's and the learner's distributions
APART = 0.15  # per-token KL to another arm's weights is at least this
BASE, ARM_A, ARM_B, LATE = "smol-base", "smol-a", "smol-b", "smol-late"
PARAMS = SamplingParams(temperature=1.0, max_tokens=16)
CHATS = [
    [{"role": "user", "content": "Write `reverse(xs)` in Python."}],
    [{"role": "user", "content": "What is 17 times 3? Answer briefly."}],
    [{"role": "user", "content": "Name three colours."}],
]
TS = "2026-12-04T00:00:00Z"


@pytest.fixture(scope="module")
def base() -> LoadedBase:
    return load_base(fetch("smollm2-135m", models_dir(), log=lambda _: None))


def _adapter(registry: CheckpointRegistry, checkpoint_id: str, base: LoadedBase,
             seed: int) -> CausalLMPolicy:  # fmt: skip
    """A LoRA checkpoint whose B matrices are seeded noise (a fresh adapter changes nothing),
    registered; the policy the learner scores it with (the registered weights, as
    ``load_policy`` would load them: ``test_llamacpp_switch`` loads them from the registry)."""
    settings = LoraSettings(r=4, alpha=8, targets=("q_proj", "v_proj"))
    adapted = with_lora(copy.deepcopy(base.model), settings)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in adapted.named_parameters():
            if "lora_B" in name:
                p.copy_(0.3 * torch.randn(p.shape, generator=generator))
    policy = CausalLMPolicy(adapted, base.tokenizer)
    weights, files = weight_writers(policy, settings, None)
    registry.register(checkpoint_id=checkpoint_id, parent=None, model=model_ref(base),
                      weights=weights, training=TrainingRef(), files=files, evals={},
                      batches=(), status=PROMOTED)  # fmt: skip
    adapted.eval()
    return policy


@pytest.fixture(scope="module")
def checkpoints(
    base: LoadedBase, tmp_path_factory: pytest.TempPathFactory
) -> tuple[CheckpointRegistry, dict[str, CausalLMPolicy]]:
    """The registry (the GGUF base and three LoRA checkpoints over it) and each checkpoint's
    policy."""
    registry = CheckpointRegistry(tmp_path_factory.mktemp("shared") / "registry")
    registry.register(checkpoint_id=BASE, parent=None, model=model_ref(base),
                      weights=WeightsRef(kind="base"), training=TrainingRef(), files={},
                      evals={}, batches=(), status=PROMOTED)  # fmt: skip
    policies = {BASE: CausalLMPolicy(base.model, base.tokenizer)}
    for seed, checkpoint in enumerate((ARM_A, ARM_B, LATE), start=11):
        policies[checkpoint] = _adapter(registry, checkpoint, base, seed)
    return registry, policies


def _gap(records: list[Rollout], policy: CausalLMPolicy) -> float:
    """Mean |engine - learner| log-probability per token."""
    diffs = [
        abs(a - b)
        for r, scored in zip(records, scored(policy, records), strict=True)
        for a, b in zip(r.logprobs, scored, strict=True)
    ]
    return sum(diffs) / len(diffs)


def _records(gens: list[Generation]) -> list[Rollout]:
    out = [rollout_of(g, "i", PARAMS, None, TS) for g in gens]
    return [r for r in out if isinstance(r, Rollout)]


async def _ask(backend: EngineBackend, checkpoint: str, chats: list[Any]) -> list[Generation]:
    gens = []
    for chat in chats:
        route = backend.target(checkpoint)
        gens.append(await backend.chat(chat_asked(route, {"messages": chat}, PARAMS)))
    return gens


def test_one_server_serves_each_arm_with_its_own_log_probs(
    checkpoints: tuple[CheckpointRegistry, dict[str, CausalLMPolicy]], tmp_path: Path
) -> None:
    registry, policies = checkpoints
    # converted files in the cache's folder: each is named by the weights it holds
    settings = EngineSettings(binary=BINARY, cache_root=CACHE, log_dir=tmp_path / "logs",
                              threads=2, slots=4, exact=True, share_base=True)  # fmt: skip
    fleet = EngineFleet(settings, registry)
    failures: list[BaseException] = []

    async def run() -> dict[str, list[Generation]]:
        backend = await asyncio.to_thread(EngineBackend, fleet, registry, BASE, {ARM_A, ARM_B})
        try:
            assert len(fleet.running()) == 1, fleet.running()  # the base and both arms
            served = {c: await _ask(backend, c, CHATS) for c in (CURRENT, ARM_A, ARM_B)}
            served[BASE] = served.pop(CURRENT)
            # a checkpoint joins while the arms are asked: all move to a new server
            stop = threading.Event()

            async def keep_asking() -> int:
                answered = 0
                while not stop.is_set():
                    try:
                        await _ask(backend, ARM_A, CHATS[:1])
                        answered += 1
                    except BaseException as exc:  # noqa: BLE001 - every failure is reported
                        failures.append(exc)
                        return answered
                return answered

            asking = asyncio.ensure_future(keep_asking())
            await asyncio.sleep(0.5)
            await asyncio.to_thread(backend.pin, registry.get(LATE))
            served[LATE] = await _ask(backend, LATE, CHATS)
            stop.set()
            assert await asking > 0
            for _ in range(300):  # the replaced server stops once drained
                if len(fleet.running()) == 1:
                    break
                await asyncio.sleep(0.1)
            assert fleet.running() == ["+".join(sorted((BASE, ARM_A, ARM_B, LATE)))]
            return served
        finally:
            await backend.close()

    served = asyncio.run(run())
    assert failures == []
    assert fleet.running() == []
    gaps, kls = {}, {}
    for checkpoint, gens in served.items():
        records = _records(gens)
        assert len(records) >= 2, gens
        assert {r.checkpoint_id for r in records} == {checkpoint}
        gaps[checkpoint] = _gap(records, policies[checkpoint])
        kls[checkpoint] = {
            other: mismatch([list(r.logprobs) for r in records], scored(p, records)).kl_k3
            for other, p in policies.items()
        }
    # mean |engine - learner| log-probability of the sampled tokens: 0.003-0.006 nats, as for a
    # server of the base alone (f16 against the learner's float32)
    print("mean log-prob gaps", gaps, "per-token KL", kls)
    for checkpoint in served:
        assert kls[checkpoint][checkpoint] < KL_LIMIT, kls  # its own adapter, as the learner scores
        others = [kl for other, kl in kls[checkpoint].items() if other != checkpoint]
        assert min(others) > APART, kls  # and no other checkpoint's


def test_the_shared_server_loads_each_adapter_unapplied(tmp_path: Path) -> None:
    from llamacpp.server import EngineConfig

    config = EngineConfig(BINARY, tmp_path / "m.gguf", 1, adapters=(Path("a.gguf"), Path("b")))
    cmd = config.command()
    assert cmd.count("--lora") == 2 and "--lora-init-without-apply" in cmd
    assert cmd[cmd.index("--cache-ram") + 1] == "0"
    with pytest.raises(ValueError, match="either"):
        EngineConfig(BINARY, Path("m.gguf"), 1, lora=Path("a"), adapters=(Path("b"),)).command()


def test_checkpoints_of_other_model_files_are_not_shared(tmp_path: Path) -> None:
    from llamacpp.convert import EngineWeights

    settings = EngineSettings(binary=BINARY, cache_root=CACHE, log_dir=tmp_path)
    fleet = EngineFleet(settings, CheckpointRegistry(tmp_path / "registry"))
    with pytest.raises(ValueError, match="one model file"):
        fleet.start_shared({"a": EngineWeights(Path("x.gguf")), "b": EngineWeights(Path("y.gguf"))})
