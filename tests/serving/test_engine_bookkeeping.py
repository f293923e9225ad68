"""The llama.cpp engine backend's bookkeeping, on a fleet that starts no server: what it keeps
of the checkpoints it has served (the servers themselves: ``test_llamacpp_switch.py``)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from checkpoints.record import PROMOTED
from llamacpp.convert import EngineWeights
from serving.backends.llamacpp_engine import EngineBackend
from tests.support.checkpoints import register_variant
from tests.support.engine import CACHE


class _Server:
    def __init__(self, url: str) -> None:
        self.url, self.retired = url, False

    def lora(self, checkpoint_id: str) -> None:
        return None


class _Fleet:
    """Converts and starts nothing: each checkpoint's weights are its id, each server a name."""

    def __init__(self, share_base: bool) -> None:
        # the llama.cpp cache: the backend reads its schema converter from there at start
        self.settings = SimpleNamespace(share_base=share_base, cache_root=CACHE)
        self.retired: list[str] = []

    def weights(self, info):
        return EngineWeights(Path("base.gguf"), Path(f"{info.checkpoint_id}.gguf"))

    def start_on(self, checkpoint_id, weights):
        return _Server(f"http://{checkpoint_id}.invalid")

    def start_shared(self, members):
        return self.start_on("+".join(sorted(members)), None)

    def retire(self, engine) -> None:
        self.retired.append(engine.url)


def test_the_backend_forgets_the_weights_of_checkpoints_it_no_longer_serves(registry):
    for share_base in (False, True):
        fleet = _Fleet(share_base)
        backend = EngineBackend(fleet, registry, "t-0000")  # type: ignore[arg-type]
        parent = "t-0000"
        for k in range(1, 9):  # eight promotions, each taken up in turn
            child = f"t-{k + (0 if not share_base else 100):04d}"
            info = register_variant(registry, child, parent, seed=k, status=PROMOTED)
            assert backend.take_up(info)
            parent = child
        assert set(backend._weights) == {parent}, backend._weights  # not one per promotion
        assert len(fleet.retired) == 8  # each replaced server was retired
        canary = register_variant(registry, "t-0900" if share_base else "t-0800", parent,
                                  seed=99, status=PROMOTED)  # fmt: skip
        backend.pin(canary)  # beside the followed one: both kept, to share a server
        assert set(backend._weights) == {parent, canary.checkpoint_id}
