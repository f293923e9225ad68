"""A round's candidate evals, and what samples them: the candidate and its parent answer the
same prompts with the same seeds (``release.eval_round``), sampled either by transformers (the
parent being the candidate's own model with the trainable weights it had before the update,
``models.snapshot``) or, with ``rtrl train --eval-engine llama.cpp``, by a llama-server each,
on the GGUF files the gateway serves them from.

Why llama.cpp: a code-world round's candidate evals are 72 answers of SmolLM2 (36 a
checkpoint); the transformers sampler takes ~80 s for them on two cores, llama.cpp about half
(bench/RESULTS.md). With an exact engine (``EngineSettings.exact``) both sample the learner's own
weights, so the paired comparison is of the same two distributions.

The candidate is not registered yet: its adapter is converted from memory
(``llamacpp.convert.candidate_lora_gguf``), under the name the registered adapter
would get, so a promoted candidate is found converted when the gateway switches to it. Only a
LoRA candidate goes this way: full weights take a minute to convert, and are sampled by
transformers as before.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

from agent.tasks import Task
from checkpoints.record import CheckpointInfo
from checkpoints.store import CheckpointRegistry
from models.examples import Example
from models.loading import LoraSettings, adapter_state
from models.policy import CausalLMPolicy, Sampler
from models.snapshot import SnapshotPolicy, trainable_snapshot
from release.candidate_evals import RateTest
from release.eval_round import candidate_evals
from release.gate import GateConfig
from release.tool_opening import OpeningCheck, OpeningConfig, tool_opening_check

if TYPE_CHECKING:
    from llamacpp.fleet import EngineSettings
    from llamacpp.sampler import EngineSampler

log = logging.getLogger(__name__)
LLAMA_CPP, TRANSFORMERS = "llama.cpp", "transformers"


class RoundEvals:
    """A round's candidate evals, set up before the update: which engine samples them
    (``by``), and for transformers the parent's trainable weights, copied now, only where the
    evals run (the main process, with eval prompts: for full weights the copy is the whole
    model)."""

    def __init__(self, policy: CausalLMPolicy, gate: GateConfig, engine: EngineSettings | None,
                 adapter: LoraSettings | None, main_process: bool,
                 opening: OpeningConfig | None = None,
                 opening_tasks: Sequence[Task] | None = None) -> None:  # fmt: skip
        self.gate = gate
        self.opening, self.opening_tasks = opening, opening_tasks  # the check's (None: defaults)
        self.engine = engine if adapter is not None else None
        self.adapter = adapter
        self.by = LLAMA_CPP if self.engine is not None else TRANSFORMERS
        sampled_here = main_process and gate.eval_prompts > 0 and self.engine is None
        scored_here = main_process and gate.tool_opening
        self._parent_weights = trainable_snapshot(policy) if sampled_here or scored_here else {}

    def run(self, registry: CheckpointRegistry, parent: CheckpointInfo, candidate_id: str,
            candidate: CausalLMPolicy, held: Sequence[Example], seed: int
            ) -> list[RateTest]:  # fmt: skip
        """The candidate's behaviour against its parent's on the held-out prompts and the eval
        tasks (none when ``gate.eval_prompts`` is 0)."""
        if self.gate.eval_prompts == 0:
            return []
        if self.engine is None:
            snapshot = SnapshotPolicy(candidate, self._parent_weights)
            return self._tests(snapshot, candidate, held, seed, candidate)
        assert self.adapter is not None
        with engine_pair(self.engine, registry, parent, candidate_id, candidate,
                         self.adapter) as (before, after):  # fmt: skip
            return self._tests(before, after, held, seed, candidate)

    def opening_check(self, candidate: CausalLMPolicy, config: OpeningConfig | None = None,
                      tasks: Sequence[Task] | None = None) -> OpeningCheck | None:  # fmt: skip
        """With ``gate.tool_opening``: the candidate's probability of opening each agent task's
        first answer with a tool call against its parent's (scored on the learner's weights,
        whichever engine samples the evals); None when the check is off."""
        if not self.gate.tool_opening:
            return None
        parent = SnapshotPolicy(candidate, self._parent_weights)
        check = tool_opening_check(parent, candidate, config or self.opening,
                                   tasks if tasks is not None else self.opening_tasks)  # fmt: skip
        log.info("%s", check.message)
        return check

    def opening_alarms(self, candidate: CausalLMPolicy, config: OpeningConfig | None = None,
                       tasks: Sequence[Task] | None = None) -> list[str]:  # fmt: skip
        """The check's message as the gate takes alarms: one when the fall blocks, else none."""
        check = self.opening_check(candidate, config, tasks)
        return check.alarms if check is not None else []

    def _tests(self, parent: Sampler, candidate: Sampler, held: Sequence[Example], seed: int,
               model: CausalLMPolicy) -> list[RateTest]:  # fmt: skip
        recent = [e.rollout.prompt_ids for e in held]
        tests = candidate_evals(parent, candidate, recent, held[0].rollout.sampling, self.gate,
                                seed, vocab_size=model.vocab_size)  # fmt: skip
        for test in tests:
            log.info("%s%s", test.message, " ALARM" if test.alarm else "")
        return tests


@contextmanager
def engine_pair(settings: EngineSettings, registry: CheckpointRegistry, parent: CheckpointInfo,
                candidate_id: str, candidate: CausalLMPolicy,
                lora: LoraSettings) -> Iterator[tuple[EngineSampler, EngineSampler]]:  # fmt: skip
    """Samplers of ``parent`` and of the trained ``candidate`` (a LoRA adapter over the same
    base), on one server that loaded both adapters, stopped on the way out: one start and one
    model in memory. The paired evals sample one checkpoint after the other, so no batch mixes
    the two adapters (which llama.cpp would not batch together) and each has every thread."""
    from llamacpp.convert import (
        EngineWeights,
        candidate_lora_gguf,
        converted_dir,
        engine_weights,
    )
    from llamacpp.sampler import shared_samplers

    out_dir = settings.converted_dir or converted_dir(settings.cache_root)
    parent_files = engine_weights(registry, parent, settings.cache_root, settings.outtype,
                                  out_dir=out_dir, exact=settings.exact)  # fmt: skip
    adapter = candidate_lora_gguf(
        adapter_state(candidate.model), lora, parent.model, settings.cache_root, out_dir
    )
    candidate_files = EngineWeights(parent_files.model, adapter)
    members = {parent.checkpoint_id: parent_files, candidate_id: candidate_files}
    with shared_samplers(settings, registry, members) as samplers:
        yield samplers[parent.checkpoint_id], samplers[candidate_id]
