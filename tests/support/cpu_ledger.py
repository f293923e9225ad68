"""CPU seconds by service, read from the processes themselves: each service's process and its
children (a gateway's llama-servers, a trainer's eval server), over restarts.

Each process is kept by (service, pid, start time) at its last sample, so one that ends between
samples (a llama-server replaced at a swap or killed, a service restarted by its supervisor)
keeps what it used, short of at most one period; a pid the system reuses is a new process.
"""

from __future__ import annotations

import psutil


class CpuLedger:
    def __init__(self) -> None:
        self._by_proc: dict[tuple[str, int, float], float] = {}

    def sample(self, service: str, pid: int) -> None:
        """Read ``pid``'s and its descendants' user and system CPU seconds as ``service``'s; a
        pid that is gone is skipped."""
        try:
            root = psutil.Process(pid)
            procs = [root, *root.children(recursive=True)]
        except (psutil.Error, ValueError):
            return
        for proc in procs:
            try:
                key = (service, proc.pid, proc.create_time())
                self._by_proc[key] = sum(proc.cpu_times()[:2])
            except psutil.Error:
                continue

    def totals(self) -> dict[str, float]:
        """CPU seconds by service, every process it ever had summed."""
        out: dict[str, float] = {}
        for (service, _, _), seconds in self._by_proc.items():
            out[service] = out.get(service, 0.0) + seconds
        return out
