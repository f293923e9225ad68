#!/usr/bin/env python3
"""The trainer's two hot paths against their limits, measured in the same run:

* serving: rollouts/s of ``PolicyServer.complete`` (sample a completion, publish the rollout on
  Kafka, every one acknowledged at the end) against sampling alone (``trainer.policy.sample`` in
  a loop): what publishing costs on top of generating;
* the update: examples/s of ``trainer.learner.update`` (PPO-clip through accelerate, shape
  groups, seeded minibatches, stats) against a bare torch loop doing the same forward, loss,
  backward and Adam steps over the same minibatches: what the learner's bookkeeping costs;
* the off-policy estimate (examples/s) for scale.

The default policy of the local loop (``PolicyConfig()``: vocabulary 32, hidden 64, 8 tokens).
Figures to stdout and ``bench/out/trainer.json``.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import format_table, kafka, machine, reexec_in_venv, write_results  # noqa: E402

reexec_in_venv(__file__)

import torch  # noqa: E402

from infra.topics import TopicNames  # noqa: E402
from infra.topics_apply import apply_topics  # noqa: E402
from trainer.examples import Example  # noqa: E402
from trainer.learner import LearnerConfig, ppo_loss, shape_groups, update  # noqa: E402
from trainer.offpolicy import estimate  # noqa: E402
from trainer.policy import PolicyConfig, new_policy, sample, token_logprobs  # noqa: E402
from trainer.registry import CheckpointRegistry  # noqa: E402
from trainer.rollout import Rollout  # noqa: E402
from trainer.serving import PolicyServer  # noqa: E402

TS = "2026-11-30T10:00:00.000000Z"


def prompts(n: int, vocab: int, seed: int = 0) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(vocab) for _ in range(4)] for _ in range(n)]


def bench_serving(bootstrap: str, n: int) -> list[dict]:
    """Sampling alone before and after the served run (the faster is the limit), after a
    warm-up: torch's first calls are slower."""
    config = PolicyConfig()
    asked = prompts(n, config.vocab_size)
    with tempfile.TemporaryDirectory() as tmp:
        registry = CheckpointRegistry(Path(tmp))
        registry.register(new_policy(config, 0), checkpoint_id="b-0000", parent=None, evals={},
                          batches=(), status="promoted")
        policy = registry.load("b-0000")
        generator = torch.Generator().manual_seed(0)

        def sampling_alone() -> float:
            started = time.perf_counter()
            for prompt in asked:
                sample(policy, prompt, generator)
            return time.perf_counter() - started

        sampling_alone()  # warm-up
        raw_s = [sampling_alone()]
        names = TopicNames(f"bench{uuid.uuid4().hex[:6]}.")
        apply_topics(bootstrap, names, replication=1)
        server = PolicyServer(registry, bootstrap, names, "b-0000")
        started = time.perf_counter()
        for i, prompt in enumerate(asked):
            server.complete(f"i-{i}", prompt)
        server.flush()
        served_s = time.perf_counter() - started
        server.close()
        raw_s.append(sampling_alone())
    return [{"row": "sampling alone (limit; before, after)", "n": n,
             "per_s": n / min(raw_s), "runs": [n / s for s in raw_s]},
            {"row": "PolicyServer.complete + Kafka", "n": n, "per_s": n / served_s,
             "ratio": min(raw_s) / served_s}]


def examples(n: int) -> list[Example]:
    config = PolicyConfig()
    policy = new_policy(config, 0)
    generator = torch.Generator().manual_seed(1)
    rng = random.Random(1)
    out = []
    for i, prompt in enumerate(prompts(n, config.vocab_size, seed=2)):
        ids, logprobs = sample(policy, prompt, generator)
        reward = sum(t < 8 for t in ids) / len(ids) + rng.random() * 0.1
        out.append(Example(Rollout(f"i-{i}", "b", tuple(prompt), tuple(ids), tuple(logprobs), TS),
                           reward))
    return out


def bare_update(policy: torch.nn.Module, batch: list[Example], config: LearnerConfig) -> None:
    """The same steps with nothing around them: the limit of the learner."""
    (group,) = shape_groups(batch, PolicyConfig().vocab_size)
    rewards = group.rewards
    advantage = (rewards - rewards.mean()) / (rewards.std(unbiased=False) + 1e-8)
    optimizer = torch.optim.Adam(policy.parameters(), lr=config.lr)
    generator = torch.Generator().manual_seed(config.seed)
    for _ in range(config.epochs):
        for index in torch.randperm(len(batch), generator=generator).split(config.minibatch):
            new = token_logprobs(policy, group.prompts[index], group.completions[index])  # type: ignore[arg-type]
            loss, _ = ppo_loss(new, group.behaviour_logprobs[index], advantage[index],
                               config.clip)
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), config.max_grad_norm)
            optimizer.step()


def bench_learner(n: int) -> list[dict]:
    batch = examples(n)
    config = LearnerConfig()
    rows = []
    for attempt in range(2):  # the first warms torch up; the second is reported
        policy = new_policy(PolicyConfig(), 0)
        started = time.perf_counter()
        bare_update(policy, batch, config)
        raw_s = time.perf_counter() - started
        started = time.perf_counter()
        update(new_policy(PolicyConfig(), 0), batch, config)
        learner_s = time.perf_counter() - started
        started = time.perf_counter()
        estimate(policy, batch)
        estimate_s = time.perf_counter() - started
        if attempt:
            per_epoch = n * config.epochs
            rows = [{"row": "bare torch PPO loop (limit)", "n": n, "per_s": per_epoch / raw_s},
                    {"row": "trainer.learner.update", "n": n, "per_s": per_epoch / learner_s,
                     "ratio": raw_s / learner_s},
                    {"row": "trainer.offpolicy.estimate", "n": n, "per_s": n / estimate_s}]
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", help="an existing broker (default: start one)")
    parser.add_argument("--rollouts", type=int, default=3000)
    parser.add_argument("--examples", type=int, default=2000)
    args = parser.parse_args()
    torch.set_num_threads(1)  # one core, like the serving process of `rtrl run`
    print(f"update: {args.examples} examples x {LearnerConfig().epochs} epochs ...",
          file=sys.stderr, flush=True)
    learner_rows = bench_learner(args.examples)
    with kafka(args.bootstrap) as bootstrap:
        print(f"serving: {args.rollouts} rollouts ...", file=sys.stderr, flush=True)
        serving_rows = bench_serving(bootstrap, args.rollouts)
    rows = serving_rows + learner_rows
    print(format_table(["path", "n", "per second", "ratio to its limit"],
                       [[r["row"], r["n"], r["per_s"], r.get("ratio", "")] for r in rows]))
    print("(update: examples x epochs per second)")
    write_results("trainer", {"machine": machine(), "rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
