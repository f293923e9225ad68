"""Which of a llama-server's slots a request runs in, and whether it may reuse that slot's cache.

A llama-server keeps each slot's last prompt (and answer) in its KV cache and, left to choose,
sends a request to the free slot whose cache shares the longest prefix with its prompt. Shared
by organisations, that is a leak: a request of one organisation would run on another's cached
prefix, and the time it saves (or the ``cached_tokens`` it reports) tells whether someone else
sent that prefix. So the gateway chooses the slot itself (``id_slot``), keyed by the
organisation and the adapter the request runs under (its cache key): a slot whose last request
had the same key is reused with its cache (``cache_prompt``), the one sharing the longest prefix
first; any other slot is taken cold (``cache_prompt`` false: every prompt token evaluated
again). A slot whose last request failed or was cancelled is cold for everyone, since what it
holds is not known. llama-server's host-memory prompt cache, which moves prompts between slots,
is turned off on every server the gateway starts (``llamacpp.server``).

A request waits here while every slot is busy, as it would have waited in llama-server's queue,
for at most the gateway's slot wait: past it, :class:`SlotsBusy` (the gateway answers 503
``overloaded``), so that a request the server cannot take in time is refused with a reason
instead of queueing past its client's timeout. The ledger sees only this gateway's requests: a
server shared with other clients is not covered.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


class SlotsBusy(Exception):
    """Every slot stayed busy for the whole wait."""

    def __init__(self, slots: int, waited_s: float) -> None:
        super().__init__(f"all {slots} slot(s) stayed busy for {waited_s:g} s")
        self.slots, self.waited_s = slots, waited_s


@dataclass(frozen=True)
class SlotLease:
    slot: int
    warm: bool  # the slot's cache is this key's: reuse it (``cache_prompt``)


@dataclass
class _Slot:
    key: str | None = None  # the cache key of the slot's last request (None: unknown or empty)
    tokens: Sequence[int] = ()  # what it holds: that request's prompt and answer
    busy: bool = False
    last_used: int = 0


def cache_key(tenant: str, adapter: Mapping[str, Any]) -> str:
    """A slot cache's key: the organisation and the adapter choice its request runs under (a
    server's adapters are fixed at its start, so the choice names the adapter's content).

    >>> cache_key("acme", {}) == cache_key("globex", {}), cache_key("", {"lora": []})
    (False, '["", {"lora": []}]')
    """
    return json.dumps([tenant, dict(adapter)], sort_keys=True)


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading ids ``a`` and ``b`` share.

    >>> common_prefix([1, 2, 3], [1, 2, 4, 5]), common_prefix([], [1])
    (2, 0)
    """
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


@dataclass
class SlotLedger:
    """One server's slots as this gateway has used them. Used on one event loop."""

    slots: int
    _state: list[_Slot] = field(init=False)
    _free: asyncio.Condition = field(init=False)
    _clock: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        if self.slots < 1:
            raise ValueError("a server has at least one slot")
        self._state = [_Slot() for _ in range(self.slots)]
        self._free = asyncio.Condition()

    def choose(self, key: str, prompt: Sequence[int]) -> SlotLease | None:
        """The free slot for a request under ``key`` with ``prompt`` (None when all are busy):
        the same key's slot sharing the longest prefix with it, else the least recently used
        (an empty one first, so a new run does not evict another's cache while one is empty)."""
        free = [i for i, s in enumerate(self._state) if not s.busy]
        if not free:
            return None
        shared = {i: common_prefix(self._state[i].tokens, prompt) for i in free
                  if self._state[i].key == key}  # fmt: skip
        if shared and max(shared.values()) > 0:
            best = max(shared, key=lambda i: (shared[i], self._state[i].last_used))
            return SlotLease(best, warm=True)
        oldest = min(free, key=lambda i: self._state[i].last_used)
        return SlotLease(oldest, warm=self._state[oldest].key == key)

    async def acquire(self, key: str, prompt: Sequence[int],
                      wait_s: float | None = None) -> SlotLease:  # fmt: skip
        """A slot for the request, once one is free; :class:`SlotsBusy` when none was within
        ``wait_s`` (None: wait as long as it takes)."""
        loop = asyncio.get_running_loop()
        deadline = None if wait_s is None else loop.time() + wait_s
        async with self._free:
            while (lease := self.choose(key, prompt)) is None:
                if deadline is None:
                    await self._free.wait()
                    continue
                try:  # re-holds the lock when it times out
                    await asyncio.wait_for(self._free.wait(), max(0.0, deadline - loop.time()))
                except TimeoutError:
                    if (lease := self.choose(key, prompt)) is None:
                        raise SlotsBusy(self.slots, wait_s or 0.0) from None
                    break
            self._clock += 1
            slot = self._state[lease.slot]
            slot.busy, slot.last_used = True, self._clock
            return lease

    async def release(self, lease: SlotLease, key: str, tokens: Sequence[int] | None) -> None:
        """The slot free again, holding ``tokens`` under ``key``; ``tokens`` None: the request
        failed, and the slot's cache is no one's."""
        async with self._free:
            slot = self._state[lease.slot]
            slot.busy = False
            slot.key, slot.tokens = (key, tokens) if tokens is not None else (None, ())
            # every waiter looks again: one woken as its wait ran out would take the wake with it
            self._free.notify_all()

    def keys(self) -> list[str | None]:
        """Each slot's cache key, for tests and the logs."""
        return [s.key for s in self._state]
