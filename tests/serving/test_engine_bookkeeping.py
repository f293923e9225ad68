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
    def __init__(self, url: str, threads: int = 2) -> None:
        self.url, self.retired = url, False
        self.checkpoint_id = url
        self.server = SimpleNamespace(config=SimpleNamespace(threads=threads))

    def lora(self, checkpoint_id: str) -> None:
        return None

    def lease(self) -> None:
        pass


class _Fleet:
    """Converts and starts nothing: each checkpoint's weights are its id, each server a name."""

    def __init__(self, share_base: bool) -> None:
        # the llama.cpp cache: the backend reads its schema converter from there at start
        self.settings = SimpleNamespace(share_base=share_base, cache_root=CACHE)
        self.budget = 2  # the threads its servers share
        self.retired: list[str] = []

    def weights(self, info):
        return EngineWeights(Path("base.gguf"), Path(f"{info.checkpoint_id}.gguf"))

    def start_on(self, checkpoint_id, weights):
        return _Server(f"http://{checkpoint_id}.invalid")

    def start_shared(self, members):
        return self.start_on("+".join(sorted(members)), None)

    def restart_with(self, engine, threads):
        return _Server(f"{engine.url}+t{threads}", threads)

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


def test_servers_share_the_threads_as_they_join_and_leave(registry):
    """A pinned line's server and the followed one each get half the budget, each replaced
    server retired; alone again, the followed one gets it all back."""
    fleet = _Fleet(share_base=False)
    backend = EngineBackend(fleet, registry, "t-0000")  # type: ignore[arg-type]
    line = register_variant(registry, "t-0500", "t-0000", seed=5, status=PROMOTED)
    backend.pin(line)
    routes = [backend.current, *backend._pinned.values()]
    assert [r.engine.server.config.threads for r in routes] == [1, 1]
    assert backend.target("t-0500").engine.url == "http://t-0500.invalid+t1"
    assert sorted(fleet.retired) == ["http://t-0000.invalid", "http://t-0500.invalid"]
    backend.unpin("t-0500")
    assert backend.current.engine.server.config.threads == 2
    assert fleet.retired[-2:] == ["http://t-0500.invalid+t1", "http://t-0000.invalid+t1"]
