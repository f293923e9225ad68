"""The gate's minimum evidence for `rtrl run`'s rounds, fitted to the round's size.

`rtrl train` waits until its batches can meet the gate's minimums (``trainer.trigger``), 50
held-out runs and 10 users by default. A round of `rtrl run` is one batch of a set number of
users, and the loop goes on only once the round trained: so the run asks for at most two thirds
of what a round holds out (some runs end without a reward), and never more than the defaults. The
gate's level does not rest on the minimums (its CR2 bound with the Bell-McCaffrey t holds down to
6-8 users); a thin round is simply less often promoted.
"""

from __future__ import annotations

from collections.abc import Sequence

DEFAULT_MIN_RUNS, DEFAULT_MIN_USERS = 50, 10  # release.gate.GateConfig's
DEFAULT_HELD_OUT = 0.3  # trainer.round_options.RoundOptions's


def gate_minimums(users: int, train_args: Sequence[str]) -> list[str]:
    """`rtrl train`'s ``--gate-min-examples`` and ``--gate-min-users`` for a round of ``users``
    users (one run each), at the held-out share ``train_args`` give (their last
    ``--held-out``).

    >>> gate_minimums(48, ["--held-out", "0.5"])
    ['--gate-min-examples', '16', '--gate-min-users', '10']
    >>> gate_minimums(9, ["--held-out", "0.5"])
    ['--gate-min-examples', '3', '--gate-min-users', '3']
    >>> gate_minimums(1000, [])
    ['--gate-min-examples', '50', '--gate-min-users', '10']
    """
    args = list(train_args)
    share = DEFAULT_HELD_OUT
    for i, arg in enumerate(args[:-1]):
        if arg == "--held-out":
            share = float(args[i + 1])
    fitted = max(1, int(2 * users * share) // 3)
    runs, people = min(DEFAULT_MIN_RUNS, fitted), min(DEFAULT_MIN_USERS, max(2, fitted))
    return ["--gate-min-examples", str(runs), "--gate-min-users", str(people)]
