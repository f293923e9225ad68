"""Test helpers for local clusters that start and stop brokers of their own.

A listening port inside the kernel's ephemeral range can be taken between our check and
the broker's bind by any outgoing connection -- including the nodes' own connections to
each other. So blocks for multi-node clusters are picked below that range.
"""

from __future__ import annotations

import argparse
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


def quiet_port_block(size: int, host: str = "127.0.0.1") -> int:
    """A base port such that base..base+size-1 are free now and outside the ephemeral range."""
    low, high = ephemeral_range()
    windows = [(10000, low - size), (high + 1, 65535 - size)]
    windows = [(a, b) for a, b in windows if b > a]
    rng = random.Random()
    for _ in range(200):
        start, stop = rng.choice(windows)
        base = rng.randrange(start, stop)
        if all(_free(host, p) for p in range(base, base + size)):
            return base
    raise RuntimeError(f"no free block of {size} ports outside {low}-{high}")


def _free(host: str, port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def rtrl_subcommands() -> tuple[argparse.ArgumentParser, set[str]]:
    """The CLI's parser and the names of the subcommands the packages have registered."""
    from rtrl.cli import build_parser

    parser = build_parser()
    names: set[str] = set()
    for action in parser._actions:  # noqa: SLF001 - argparse exposes no public accessor
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            names |= set(action.choices)
    return parser, names
