"""The gateway's choice of a llama-server slot: a slot's cache is reused only by requests of the
organisation and adapter that filled it (``serving.slot_ledger``)."""

from __future__ import annotations

import asyncio

from serving.slot_ledger import SlotLedger, SlotsBusy, cache_key

ACME, GLOBEX = cache_key("acme", {}), cache_key("globex", {})
PROMPT = (1, 2, 3, 4)


def test_a_slot_s_cache_is_reused_by_its_own_organisation_only() -> None:
    async def run() -> list[tuple[int, bool]]:
        ledger = SlotLedger(2)
        out = []
        for key in (ACME, ACME, GLOBEX, GLOBEX, ACME):
            lease = await ledger.acquire(key, PROMPT)
            out.append((lease.slot, lease.warm))
            await ledger.release(lease, key, (*PROMPT, 9))
        return out

    first, again, other, other_again, back = asyncio.run(run())
    assert not first[1] and again == (first[0], True)
    assert other[1] is False and other[0] != first[0]  # the free cold slot, never acme's
    assert other_again == (other[0], True) and back == (first[0], True)


def test_another_adapter_of_the_same_organisation_is_another_cache() -> None:
    adapter_0 = cache_key("acme", {"lora": [{"id": 0, "scale": 1.0}]})
    adapter_1 = cache_key("acme", {"lora": [{"id": 1, "scale": 1.0}]})

    async def run() -> bool:
        ledger = SlotLedger(1)
        lease = await ledger.acquire(adapter_0, PROMPT)
        await ledger.release(lease, adapter_0, PROMPT)
        return (await ledger.acquire(adapter_1, PROMPT)).warm

    assert asyncio.run(run()) is False


def test_the_slot_sharing_the_longest_prefix_is_chosen_among_its_own() -> None:
    async def run() -> int:
        ledger = SlotLedger(3)
        leases = [await ledger.acquire(ACME, ()) for _ in range(3)]
        await ledger.release(leases[0], ACME, (1, 2))
        await ledger.release(leases[1], ACME, (1, 2, 3, 4, 5))
        await ledger.release(leases[2], ACME, (7,))
        return (await ledger.acquire(ACME, (1, 2, 3, 4, 6))).slot

    assert asyncio.run(run()) == 1


def test_a_failed_request_leaves_its_slot_cold_for_everyone() -> None:
    async def run() -> bool:
        ledger = SlotLedger(1)
        lease = await ledger.acquire(ACME, PROMPT)
        await ledger.release(lease, ACME, None)
        assert ledger.keys() == [None]
        return (await ledger.acquire(ACME, PROMPT)).warm

    assert asyncio.run(run()) is False


def test_a_request_waits_while_every_slot_is_busy() -> None:
    async def run() -> list[str]:
        ledger = SlotLedger(1)
        order: list[str] = []
        held = await ledger.acquire(ACME, PROMPT)

        async def second() -> None:
            lease = await ledger.acquire(GLOBEX, PROMPT)
            order.append(f"globex on {lease.slot}, warm {lease.warm}")
            await ledger.release(lease, GLOBEX, PROMPT)

        task = asyncio.create_task(second())
        await asyncio.sleep(0.05)
        order.append("acme done")
        await ledger.release(held, ACME, PROMPT)
        await task
        return order

    assert asyncio.run(run()) == ["acme done", "globex on 0, warm False"]


def test_a_new_run_takes_an_empty_slot_before_evicting_another_run_s_cache() -> None:
    async def run() -> tuple[int, int]:
        ledger = SlotLedger(2)
        lease = await ledger.acquire(ACME, PROMPT)
        await ledger.release(lease, ACME, PROMPT)
        return lease.slot, (await ledger.acquire(ACME, (8, 9))).slot

    first, new_run = asyncio.run(run())
    assert new_run != first


def test_a_request_no_slot_takes_within_its_wait_is_refused() -> None:
    async def run() -> tuple[float, SlotsBusy | None]:
        ledger = SlotLedger(1)
        await ledger.acquire(ACME, PROMPT)
        started = asyncio.get_running_loop().time()
        try:
            await ledger.acquire(GLOBEX, PROMPT, wait_s=0.1)
        except SlotsBusy as exc:
            return asyncio.get_running_loop().time() - started, exc
        return 0.0, None

    waited, busy = asyncio.run(run())
    assert busy is not None and busy.slots == 1 and busy.waited_s == 0.1
    assert 0.1 <= waited < 1.0, waited


def test_a_slot_freed_within_the_wait_is_taken_by_each_waiter() -> None:
    """Two requests waiting with a limit, two slots freed one after the other within it: both
    are taken, neither refused."""

    async def run() -> list[int]:
        ledger = SlotLedger(2)
        held = [await ledger.acquire(ACME, PROMPT) for _ in range(2)]
        waiting = [asyncio.create_task(ledger.acquire(GLOBEX, PROMPT, wait_s=2.0))
                   for _ in range(2)]  # fmt: skip
        await asyncio.sleep(0.05)
        for lease in held:
            await ledger.release(lease, ACME, PROMPT)
            await asyncio.sleep(0.05)
        return sorted(lease.slot for lease in await asyncio.gather(*waiting))

    assert asyncio.run(run()) == [0, 1]
