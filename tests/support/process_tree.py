"""A service's child processes by name: the soak's "kill the gateway's llama-server" fault finds
the servers under the gateway's pid, SIGKILLs them, and waits until the gateway has started
others (``llamacpp.fleet``'s watchdog), as an operator would see it in ``ps``."""

from __future__ import annotations

import signal
import time

import psutil


def children_named(pid: int, name: str) -> list[int]:
    """The pids of ``pid``'s descendants whose process name starts with ``name`` (the server's
    binary carries its build's hash: ``llama-server-b4f8…``); none when ``pid`` is gone."""
    try:
        procs = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []
    out = []
    for proc in procs:
        try:
            if proc.name().startswith(name):
                out.append(proc.pid)
        except psutil.Error:
            continue
    return out


def kill_children_named(pid: int, name: str, timeout_s: float = 120) -> tuple[list[int], float]:
    """SIGKILL the descendants of ``pid`` that :func:`children_named` finds; return their pids
    and the seconds until as many others run under ``pid``. TimeoutError when they are not
    back in time; ValueError when there was none to kill."""
    killed = children_named(pid, name)
    if not killed:
        raise ValueError(f"no {name} under pid {pid}")
    for child in killed:
        try:
            psutil.Process(child).send_signal(signal.SIGKILL)
        except psutil.NoSuchProcess:
            pass
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        fresh = [c for c in children_named(pid, name) if c not in killed]
        if len(fresh) >= len(killed):
            return killed, round(time.monotonic() - started, 1)
        time.sleep(0.2)
    raise TimeoutError(f"{name} under pid {pid} not started again within {timeout_s:.0f} s")
