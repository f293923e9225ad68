"""`rtrl stream worker` keeps one Faust worker process running, and restarts it when it exits.

The worker ends itself in two cases where going on in the same process would be wrong: the
consumer skipped messages (exit 75, see ``streams.offsets``), and a chunk failed (exit 70, e.g.
the broker refused a write for longer than the producer retries). Both leave nothing acked that
is not durable, so a fresh process resumes correctly from the committed offsets. The first is
restarted at once; other failures after a growing pause, and the supervisor gives up (with the
worker's exit code) after too many of them in a short time, so a worker that cannot start is
not restarted forever. SIGTERM and SIGINT are passed to the worker, whose clean stop is the
supervisor's.

The worker asks the kernel to kill it when the supervisor dies (``PR_SET_PDEATHSIG``), so a
supervisor killed with SIGKILL leaves no orphan holding partitions.
"""

from __future__ import annotations

import logging
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field

from infra.lifetime import stop_signals_call
from streams.exit_codes import EXIT_OFFSET_HOLE, MEANING

log = logging.getLogger("streams.supervisor")


@dataclass
class RestartPolicy:
    """When to restart a worker that exited, and when to give up.

    >>> policy = RestartPolicy(max_failures=2, window_s=60, first_pause_s=1, max_pause_s=5)
    >>> [policy.pause_after(code, now) for code, now in ((75, 0), (1, 1), (70, 2), (75, 3))]
    [0.0, 1.0, 2.0, 0.0]
    >>> policy.pause_after(1, 4) is None  # a third failure within the window
    True
    >>> RestartPolicy(max_failures=2, window_s=60).pause_after(1, 100)  # the old ones aged out
    1.0
    """

    max_failures: int = 5
    window_s: float = 300.0
    first_pause_s: float = 1.0
    max_pause_s: float = 30.0
    failures: list[float] = field(default_factory=list)

    def pause_after(self, code: int, now: float) -> float | None:
        """Seconds to wait before the restart, or None to give up."""
        if code == EXIT_OFFSET_HOLE:
            return 0.0
        self.failures = [t for t in self.failures if now - t < self.window_s] + [now]
        if len(self.failures) > self.max_failures:
            return None
        return float(min(self.max_pause_s, self.first_pause_s * 2 ** (len(self.failures) - 1)))


def supervise(cmd: list[str], policy: RestartPolicy | None = None) -> int:
    """Run ``cmd`` until it stops cleanly, is stopped by a signal to us, or fails too often."""
    policy = policy or RestartPolicy()
    stop = threading.Event()
    child: subprocess.Popen | None = None

    def forward(signum: int, _frame: object) -> None:
        stop.set()
        if child is not None and child.poll() is None:
            child.send_signal(signal.SIGTERM)

    with stop_signals_call(forward):
        runs = 0
        while True:
            runs += 1
            child = subprocess.Popen(cmd)
            log.info("worker started (pid %d, run %d)", child.pid, runs)
            code = child.wait()
            if stop.is_set():
                log.info("worker stopped (exit %d)", code)
                return max(code, 0)
            if code == 0:
                return 0
            pause = policy.pause_after(code, time.monotonic())
            if pause is None:
                log.error(
                    "worker exited with %d; %d failures in %.0f s, giving up",
                    code,
                    len(policy.failures),
                    policy.window_s,
                )
                return code if code > 0 else 1
            log.warning(
                "worker exited with %d (%s); restarting in %.1f s", code, describe(code), pause
            )
            if stop.wait(pause):
                return 0


def describe(code: int) -> str:
    """What a worker's exit code means.

    >>> describe(75), describe(-9)
    ('the consumer skipped messages; they are read again', 'killed by SIGKILL')
    """
    if code < 0:
        return f"killed by {signal.Signals(-code).name}"
    return MEANING.get(code, "failed")
