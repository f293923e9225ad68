"""Free loopback ports for local clusters, tests and benchmarks.

A listening port inside the kernel's ephemeral range can be taken between our check and the
broker's bind by any outgoing connection -- including a cluster's own nodes talking to each
other -- so blocks are picked outside that range.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def ephemeral_range() -> tuple[int, int]:
    """The kernel's range for outgoing connections (Linux default if unreadable)."""
    try:
        low, high = EPHEMERAL_RANGE.read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def port_bindable(host: str, port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def free_port_block(size: int, host: str = "127.0.0.1", highest: int = 65535) -> int:
    """A base port such that base..base+size-1 are free now, outside the ephemeral range and at
    most ``highest`` (`rtrl up` takes its services' metrics ports up to 65000)."""
    low, high = ephemeral_range()
    windows = [(a, b) for a, b in [(10000, low - size), (high + 1, highest - size)] if b > a]
    rng = random.Random()
    for _ in range(200):
        start, stop = rng.choice(windows)
        base = rng.randrange(start, stop)
        if all(port_bindable(host, p) for p in range(base, base + size)):
            return base
    raise RuntimeError(f"no free block of {size} ports outside {low}-{high}")
