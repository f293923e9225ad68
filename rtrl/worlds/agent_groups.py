"""The agent world's users by design: every task of a round gets the same number of runs (the
group the learner's leave-one-out baseline is taken in), and the same number of them held out
for the gate.

The learner holds out whole users by a fixed hash of the user id (``trainer.round_examples``,
its ``--held-out`` share). Drawn at random, a task's runs and its held-out share are binomial:
a task with one run has no group, a task with all its runs held out trains nothing. So the
world names its users so that the hash puts exactly ``held_per_task`` of each task's ``k`` on
the held-out side: it tries ids in a fixed order and keeps the first that fall on each side.
The hash is of the user as the learner keys it, within its organisation
(``release.offpolicy_bound.user_key`` with the ``org_id``): the same id in another
organisation is another user, and may fall on the other side.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from agent.tasks import Task
from release.offpolicy_bound import user_key
from trainer.round_examples import held_out


def held_per_task(runs_per_task: int, fraction: float) -> int:
    """How many of a task's runs are held out: the share rounded, at least one when any is
    held out and at least one trained on when there are two runs or more.

    >>> held_per_task(8, 0.25), held_per_task(4, 0.3), held_per_task(1, 0.3), held_per_task(4, 0)
    (2, 1, 0, 0)
    """
    if fraction <= 0 or runs_per_task < 2:
        return 0
    return min(max(1, round(runs_per_task * fraction)), runs_per_task - 1)


def task_users(prefix: str, runs: int, held: int, fraction: float, org_id: str) -> list[str]:
    """``runs`` user ids of ``org_id`` starting with ``prefix``, the first ``held`` of which the
    learner holds out at ``fraction`` and the others it trains on (ids tried in order:
    reproducible).

    >>> ids = task_users("u_t", 4, 1, 0.3, "acme")
    >>> [held_out(user_key(u, None, "", "acme"), 0.3) for u in ids]
    [True, False, False, False]
    """
    kept: list[str] = []
    trained: list[str] = []
    n = 0
    while len(kept) < held or len(trained) < runs - held:
        user = f"{prefix}_{n:04d}"
        n += 1
        side = kept if held_out(user_key(user, None, "", org_id), fraction) else trained
        if len(side) < (held if side is kept else runs - held):
            side.append(user)
    return kept + trained


def balanced_asks(tasks: Sequence[Task], runs_per_task: int, fraction: float, seed: int,
                  org_id: str) -> list[tuple[str, Task]]:  # fmt: skip
    """``runs_per_task`` users of ``org_id`` for each of ``tasks``, ``held_per_task`` of each
    held out, in an order shuffled by ``seed`` (so that the gateway's batches mix tasks); the
    ids are the round's own (``seed``).

    >>> from agent.tasks import get_task
    >>> asks = balanced_asks([get_task("add"), get_task("first")], 3, 0.3, 7, "acme")
    >>> sorted(t.function for _, t in asks)
    ['add', 'add', 'add', 'first', 'first', 'first']
    """
    held = held_per_task(runs_per_task, fraction)
    asks = [(user, task) for task in tasks
            for user in task_users(f"u_agent{seed}_{task.function}", runs_per_task, held,
                                   fraction, org_id)]  # fmt: skip
    random.Random(seed).shuffle(asks)
    return asks


def cycled_tasks(n: int, tasks: Sequence[Task], seed: int) -> list[Task]:
    """``n`` tasks, each of ``tasks`` as often as ``n`` allows (the closing A/B's asks): the
    tasks in turn, in an order shuffled by ``seed``.

    >>> from agent.tasks import get_task
    >>> [t.function for t in cycled_tasks(4, [get_task("add"), get_task("first")], 1)]
    ['first', 'add', 'first', 'add']
    """
    order = list(tasks)
    random.Random(seed).shuffle(order)
    return [order[k % len(order)] for k in range(n)]
