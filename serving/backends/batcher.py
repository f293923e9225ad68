"""Concurrent requests to the local backend, sampled together.

A request is a job on a queue; one thread takes the job at the head and every job queued behind
it (up to ``max_batch``, waiting at most ``max_wait_s`` for more), groups them by checkpoint and
sampling parameters (:func:`group_jobs`: one ``sample`` call draws a batch with one set of
parameters from one policy) and answers each job's future. While a batch is being sampled the
next requests queue up, so batches grow with the load without a lone request waiting for
company. Each job carries the checkpoint it was admitted with: a switch of checkpoint never
changes the policy of a request already queued.

A job may carry ``on_token(token_id, logprob, top)``: it is called on the batcher's thread with
each of its tokens as the batch draws them (a streamed request forwards them to its event loop);
a batch with no such job samples exactly as before. A job may ask for each token's ``top_n``
likeliest alternatives: its batch is sampled with the most any of its jobs asks for (what a job
shows is cut to its own number when the answer is written).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field

import torch

from models.constraint import Constraint
from models.policy import CausalLMPolicy, Completion, OnToken, TopTokens
from models.sampling import SamplingParams

log = logging.getLogger(__name__)
JobToken = Callable[[int, float, TopTokens], None]  # (token id, log-probability, likeliest)


@dataclass(frozen=True)
class Job:
    policy: CausalLMPolicy
    prompt: tuple[int, ...]
    params: SamplingParams
    on_token: JobToken | None = field(default=None, compare=False)
    top_n: int = field(default=0, compare=False)
    constraint: Constraint | None = field(default=None, compare=False)
    future: Future[Completion] = field(default_factory=Future, compare=False)


def group_jobs(jobs: Sequence[Job], max_batch: int) -> list[list[Job]]:
    """Jobs that one ``sample`` call can draw together (same policy object, same parameters),
    at most ``max_batch`` each, in the order their first job came.

    >>> from types import SimpleNamespace as J
    >>> a, b = object(), object()
    >>> jobs = [J(policy=a, params=1, n=0), J(policy=b, params=1, n=1), J(policy=a, params=1, n=2),
    ...         J(policy=a, params=2, n=3), J(policy=a, params=1, n=4)]
    >>> [[j.n for j in g] for g in group_jobs(jobs, max_batch=2)]
    [[0, 2], [1], [3], [4]]
    """
    open_groups: dict[tuple[int, SamplingParams], list[Job]] = {}
    order: list[list[Job]] = []
    for job in jobs:
        key = (id(job.policy), job.params)
        group = open_groups.get(key)
        if group is None or len(group) >= max_batch:
            group = open_groups[key] = []
            order.append(group)
        group.append(job)
    return order


class Batcher:
    def __init__(self, seed: int = 0, max_batch: int = 16, max_wait_s: float = 0.0) -> None:
        self.max_batch = max_batch
        self.max_wait_s = max_wait_s
        self._seed = seed
        self._generators: dict[torch.device, torch.Generator] = {}
        self._queue: queue.Queue[Job | None] = queue.Queue()
        self.batches = 0
        self.sampled = 0
        self._thread = threading.Thread(target=self._run, name="rtrl-batcher", daemon=True)
        self._thread.start()

    def submit(self, policy: CausalLMPolicy, prompt: Sequence[int], params: SamplingParams,
               on_token: JobToken | None = None, top_n: int = 0,
               constraint: Constraint | None = None) -> Future[Completion]:  # fmt: skip
        job = Job(policy, tuple(prompt), params, on_token, top_n, constraint=constraint)
        self._queue.put(job)
        return job.future

    def close(self, timeout_s: float = 30.0) -> None:
        """Answer what is queued, then stop."""
        self._queue.put(None)
        self._thread.join(timeout_s)

    def _generator(self, device: torch.device) -> torch.Generator:
        if device not in self._generators:
            self._generators[device] = torch.Generator(device).manual_seed(self._seed)
        return self._generators[device]

    def _take(self, first: Job) -> tuple[list[Job], bool]:
        jobs, stop = [first], False
        deadline = time.monotonic() + self.max_wait_s
        while len(jobs) < self.max_batch * 4:
            try:
                left = deadline - time.monotonic()
                nxt = self._queue.get(timeout=left) if left > 0 else self._queue.get_nowait()
            except queue.Empty:
                break
            if nxt is None:
                stop = True
                break
            jobs.append(nxt)
        return jobs, stop

    def _run(self) -> None:
        stop = False
        while not stop:
            first = self._queue.get()
            if first is None:
                return
            jobs, stop = self._take(first)
            for group in group_jobs(jobs, self.max_batch):
                live = [j for j in group if j.future.set_running_or_notify_cancel()]
                if not live:
                    continue
                policy = live[0].policy
                try:
                    done = policy.sample(
                        [j.prompt for j in live],
                        live[0].params,
                        self._generator(policy.device),
                        _rows_on_token(live),
                        max(j.top_n for j in live),
                        _constraints(live),
                    )
                except Exception as exc:  # a bad batch fails its requests, not the server
                    log.exception("sampling a batch of %d failed", len(live))
                    for job in live:
                        job.future.set_exception(exc)
                    continue
                self.batches += 1
                self.sampled += len(live)
                for job, completion in zip(live, done, strict=True):
                    job.future.set_result(completion)


def _constraints(jobs: Sequence[Job]) -> list[Constraint | None] | None:
    """Each row's grammar, or None when no row has one (the sampler's unconstrained path)."""
    constraints = [j.constraint for j in jobs]
    return constraints if any(c is not None for c in constraints) else None


def _rows_on_token(jobs: Sequence[Job]) -> OnToken | None:
    """The policy's per-row callback that passes each row's tokens to its job's ``on_token``;
    None when no job asks (sampling then does no per-token work at all).

    >>> from types import SimpleNamespace as J
    >>> seen = []
    >>> call = _rows_on_token([J(on_token=None), J(on_token=lambda t, lp, k: seen.append((t, lp)))])
    >>> call(0, 5, -0.1, ()), call(1, 7, -0.2, ()), seen
    (None, None, [(7, -0.2)])
    >>> _rows_on_token([J(on_token=None)]) is None
    True
    """
    sinks = [job.on_token for job in jobs]
    if not any(sinks):
        return None

    def on_token(row: int, token_id: int, logprob: float, top: TopTokens) -> None:
        sink = sinks[row]
        if sink is not None:
            sink(token_id, logprob, top)

    return on_token
