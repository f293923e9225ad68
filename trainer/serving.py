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
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition

from infra.settings import reliable_producer
from infra.topics import TopicNames
from ingest.contract import now_ts
from trainer.checkpoint_io import load_policy
from trainer.policy import CausalLMPolicy, Completion
from trainer.publish import decode_announcement
from trainer.registry import PROMOTED, CheckpointInfo, CheckpointRegistry
from trainer.rollout import Rollout
from trainer.sampling import SamplingParams

log = logging.getLogger(__name__)


class PolicyServer:
    def __init__(self, registry: CheckpointRegistry, bootstrap: str, topics: TopicNames,
                 checkpoint_id: str, seed: int = 0) -> None:  # fmt: skip
        self._registry = registry
        self._bootstrap = bootstrap
        self._topics = topics
        self._generator = torch.Generator().manual_seed(seed)
        self._lock = threading.Lock()
        self._serving: tuple[CheckpointInfo, CausalLMPolicy] = self._load(
            registry.get(checkpoint_id))
        self._producer = Producer(reliable_producer(bootstrap))
        self._errors: list[str] = []
        self._stop = threading.Event()
        self._follower: threading.Thread | None = None

    @property
    def checkpoint_id(self) -> str:
        return self._serving[0].checkpoint_id

    @property
    def policy(self) -> CausalLMPolicy:
        return self._serving[1]

    def complete(self, interaction_id: str, prompt_ids: list[int],
                 params: SamplingParams) -> tuple[Rollout, Completion]:
        """Sample a completion with the current checkpoint and publish it as a rollout."""
        return self.complete_many([(interaction_id, prompt_ids)], params)[0]

    def complete_many(self, requests: list[tuple[str, list[int]]],
                      params: SamplingParams) -> list[tuple[Rollout, Completion]]:
        """Sample completions for several ``(interaction_id, prompt_ids)`` in one batch, each
        published as its rollout, with the log-probabilities of the distribution sampled from
        (``params``' temperature and nucleus), as the learner expects."""
        with self._lock:
            info, policy = self._serving
            completions = policy.sample([p for _, p in requests], params, self._generator)
        out = []
        for (interaction_id, prompt_ids), completion in zip(requests, completions, strict=True):
            rollout = Rollout(interaction_id, info.checkpoint_id, info.model.identity(), params,
                              tuple(prompt_ids), completion.token_ids, completion.logprobs,
                              completion.finish_reason, now_ts())
            self._publish(rollout)
            out.append((rollout, completion))
        self._producer.poll(0)
        return out

    def _publish(self, rollout: Rollout) -> None:
        interaction_id = rollout.interaction_id
        while True:
            try:
                self._producer.produce(self._topics.rollouts, rollout.to_json(),
                                       interaction_id.encode(), on_delivery=self._on_delivery)
                break
            except BufferError:  # the producer's queue is full: let it drain, then go on
                self._producer.poll(0.05)

    def flush(self, timeout_s: float = 30.0) -> None:
        """Wait for every rollout published so far; raise if one was not acknowledged."""
        left = self._producer.flush(timeout_s)
        if left or self._errors:
            raise RuntimeError(f"rollouts not acknowledged: {left} pending, {self._errors[:3]}")

    def follow(self) -> None:
        """Start following the checkpoints topic (a daemon thread, stopped by :meth:`close`)."""
        self._follower = threading.Thread(target=self._follow, name="rtrl-serving-follow",
                                          daemon=True)
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
            self._follower.join(10)
        self._producer.flush(10)

    # --- internals --------------------------------------------------------------------------
    def _load(self, info: CheckpointInfo) -> tuple[CheckpointInfo, CausalLMPolicy]:
        policy = load_policy(self._registry, info)  # checks every file's sha256
        policy.model.eval()
        log.info("serving: loaded %s (%s weights over base %s)", info.checkpoint_id,
                 info.weights.kind, info.model.base_sha256[:12])
        return info, policy

    def _on_delivery(self, err: KafkaError | None, _msg: Message) -> None:
        if err is not None:
            self._errors.append(err.str())

    def _follow(self) -> None:
        consumer = Consumer({"bootstrap.servers": self._bootstrap, "group.id": "rtrl-serving",
                             "enable.auto.commit": False, "enable.partition.eof": False})
        topic = self._topics.checkpoints
        try:
            partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
            consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
            while not self._stop.is_set():
                message = consumer.poll(0.2)
                if message is None or message.error() is not None:
                    continue
                value = message.value()
                if value is None:  # a tombstone withdraws an announcement: nothing to load
                    continue
                info = decode_announcement(message.key(), value, topic)
                if info is not None:
                    self._consider(info)
        except Exception:  # a follower that dies must say so; serving goes on with what it has
            log.exception("serving: stopped following %s", topic)
        finally:
            consumer.close()

    def _consider(self, info: CheckpointInfo) -> None:
        current = self._serving[0]
        if info.status != PROMOTED or (info.created_at, info.checkpoint_id) <= (
                current.created_at, current.checkpoint_id):  # fmt: skip
            return
        loaded = self._load(info)
        with self._lock:
            self._serving = loaded
        log.info("serving: switched from %s to %s", current.checkpoint_id, info.checkpoint_id)
