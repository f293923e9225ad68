"""The serving side: answer prompts with the current checkpoint, publish each answer as a rollout,
and move to a new checkpoint when one is promoted.

Each completion is published on ``rollouts`` (keyed by ``interaction_id``, like the events of its
interaction) with the log-probabilities the serving policy gave its tokens; the trainer needs them.
:meth:`PolicyServer.flush` waits until Kafka acknowledged every rollout published so far: call it
before the interaction's events can close its window, or its record may find no rollout.

The server follows the compacted ``checkpoints`` topic from its beginning in a thread: a promoted
checkpoint newer than the one served is loaded from the registry (its weights file is checked
against the announced sha256) and swapped in between two requests; a rejected one is ignored.
"""

from __future__ import annotations

import logging
import threading
import time

import torch

from infra.topics import TopicNames
from ingest.contract import now_ts
from trainer.checkpoint_io import load_policy
from trainer.gateway.follower import CheckpointFollower, moves_forward
from trainer.gateway.recorder import RolloutRecorder
from trainer.policy import CausalLMPolicy, Completion
from trainer.registry import CheckpointInfo, CheckpointRegistry
from trainer.rollout import Rollout
from trainer.sampling import SamplingParams

log = logging.getLogger(__name__)


class PolicyServer:
    """The serving side in-process (``rtrl run``); ``rtrl serve`` (``trainer.gateway``) is the
    same over HTTP. Both follow checkpoints with ``gateway.follower`` and record with
    ``gateway.recorder``; this one waits for room in a full spool rather than drop a rollout,
    since a simulated round must not lose one."""

    def __init__(self, registry: CheckpointRegistry, bootstrap: str, topics: TopicNames,
                 checkpoint_id: str, seed: int = 0) -> None:  # fmt: skip
        self._registry = registry
        self._bootstrap = bootstrap
        self._topics = topics
        self._generator = torch.Generator().manual_seed(seed)
        self._lock = threading.Lock()
        self._serving: tuple[CheckpointInfo, CausalLMPolicy] = self._load(
            registry.get(checkpoint_id)
        )
        self._recorder = RolloutRecorder(bootstrap, topics.rollouts, when_full="wait")
        self._stop = threading.Event()
        self._follower: CheckpointFollower | None = None

    @property
    def checkpoint_id(self) -> str:
        return self._serving[0].checkpoint_id

    @property
    def policy(self) -> CausalLMPolicy:
        return self._serving[1]

    def complete(
        self, interaction_id: str, prompt_ids: list[int], params: SamplingParams
    ) -> tuple[Rollout, Completion]:
        """Sample a completion with the current checkpoint and publish it as a rollout."""
        return self.complete_many([(interaction_id, prompt_ids)], params)[0]

    def complete_many(
        self, requests: list[tuple[str, list[int]]], params: SamplingParams
    ) -> list[tuple[Rollout, Completion]]:
        """Sample completions for several ``(interaction_id, prompt_ids)`` in one batch, each
        published as its rollout, with the log-probabilities of the distribution sampled from
        (``params``' temperature and nucleus), as the learner expects."""
        with self._lock:
            info, policy = self._serving
            completions = policy.sample([p for _, p in requests], params, self._generator)
        out = []
        for (interaction_id, prompt_ids), completion in zip(requests, completions, strict=True):
            rollout = Rollout(
                interaction_id,
                info.checkpoint_id,
                info.model.identity(),
                params,
                tuple(prompt_ids),
                completion.token_ids,
                completion.logprobs,
                completion.finish_reason,
                now_ts(),
            )
            self._recorder.record(rollout)  # waits for room when the spool is full
            out.append((rollout, completion))
        return out

    def flush(self, timeout_s: float = 30.0) -> None:
        """Wait for every rollout published so far; raise if one was not acknowledged."""
        left = self._recorder.flush(timeout_s)
        if left or self._recorder.errors:
            raise RuntimeError(
                f"rollouts not acknowledged: {left} pending, {self._recorder.errors[:3]}"
            )

    def follow(self) -> None:
        """Start following the checkpoints topic (a daemon thread, stopped by :meth:`close`)."""
        self._follower = CheckpointFollower(
            self._bootstrap, self._topics.checkpoints, self._consider
        )
        self._follower.start()

    def wait_for(self, checkpoint_id: str, timeout_s: float) -> bool:
        """True once ``checkpoint_id`` is served (it was announced and loaded)."""
        deadline = time.monotonic() + timeout_s
        while self.checkpoint_id != checkpoint_id:
            if time.monotonic() > deadline or self._stop.wait(0.1):
                return False
        return True

    def close(self) -> None:
        self._stop.set()
        if self._follower is not None:
            self._follower.close()
        self._recorder.close(10)

    # --- internals --------------------------------------------------------------------------
    def _load(self, info: CheckpointInfo) -> tuple[CheckpointInfo, CausalLMPolicy]:
        policy = load_policy(self._registry, info)  # checks every file's sha256
        policy.model.eval()
        log.info(
            "serving: loaded %s (%s weights over base %s)",
            info.checkpoint_id,
            info.weights.kind,
            info.model.base_sha256[:12],
        )
        return info, policy

    def _consider(self, info: CheckpointInfo) -> None:
        current = self._serving[0]
        if not moves_forward(info, current):
            return
        loaded = self._load(info)
        with self._lock:
            self._serving = loaded
        log.info("serving: switched from %s to %s", current.checkpoint_id, info.checkpoint_id)
