"""UUIDv7 event ids (RFC 9562): time-ordered, so ids sort roughly by creation time and index well.

Layout (128 bits): 48-bit Unix time in ms | version 7 | 12-bit counter high | variant 0b10 |
30-bit counter low | 32 random bits. The 42-bit counter (RFC 9562 §6.2 method 1) starts at a random
value with its top bit clear each millisecond and increments within one, so ids from one process
are strictly increasing even when many are made in the same millisecond or the clock steps back.
"""

from __future__ import annotations

import os
import threading
import time

_COUNTER_BITS = 42
_COUNTER_MAX = (1 << _COUNTER_BITS) - 1
_lock = threading.Lock()
_last_ms = 0
_counter = 0


def _fresh_counter() -> int:
    # Top bit clear leaves at least 2**41 increments before the counter could overflow.
    return int.from_bytes(os.urandom(6), "big") & (_COUNTER_MAX >> 1)


def _next_state() -> tuple[int, int]:
    global _last_ms, _counter
    now_ms = time.time_ns() // 1_000_000
    with _lock:
        if now_ms > _last_ms:
            _last_ms, _counter = now_ms, _fresh_counter()
        elif _counter < _COUNTER_MAX:
            _counter += 1  # same millisecond, or the clock went back: stay monotonic
        else:
            _last_ms, _counter = _last_ms + 1, _fresh_counter()
        return _last_ms, _counter


def _after_fork_in_child() -> None:
    # A parent and its child must not continue the same counter sequence, and a lock held by
    # another thread at fork time would never be released in the child.
    global _lock, _counter
    _lock = threading.Lock()
    _counter = _fresh_counter()


os.register_at_fork(after_in_child=_after_fork_in_child)


def uuid7_int() -> int:
    """A new UUIDv7 as a 128-bit integer."""
    unix_ms, counter = _next_state()
    rand32 = int.from_bytes(os.urandom(4), "big")
    return (
        (unix_ms & 0xFFFF_FFFF_FFFF) << 80
        | 0x7 << 76
        | (counter >> 30) << 64
        | 0b10 << 62
        | (counter & 0x3FFF_FFFF) << 32
        | rand32
    )


def uuid7() -> str:
    """A new UUIDv7 in its canonical 36-character form, a valid ``event_id``.

    >>> import uuid
    >>> uuid.UUID(uuid7()).version
    7
    """
    hexa = f"{uuid7_int():032x}"
    return f"{hexa[:8]}-{hexa[8:12]}-{hexa[12:16]}-{hexa[16:20]}-{hexa[20:]}"


def uuid7_unix_ms(value: str) -> int:
    """The creation time (Unix ms) carried by a UUIDv7 string.

    >>> uuid7_unix_ms("019ad2f7-4a3b-7000-8000-000000000000")
    1764476013115
    """
    return int(value.replace("-", "")[:12], 16)
