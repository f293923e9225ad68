"""Agent runs sampled from the tiny model for the learner's tests: two calls a run, the second's
prompt the first's prompt and answer and then a tool result (the environment's tokens)."""

from __future__ import annotations

import torch

from checkpoints.record import CheckpointInfo
from models.policy import CausalLMPolicy
from models.rollout import Rollout, TurnRef
from tests.support.checkpoints import PARAMS, TS

TOOL_RESULT = "<|im_start|>tool\n3 of 4 tests passed<|im_end|>\n<|im_start|>assistant\n"


def agent_run(policy: CausalLMPolicy, info: CheckpointInfo, run: str, seed: int,
              broken: int = 0, task: str | None = None) -> tuple[list[Rollout], range]:  # fmt: skip
    """Two calls of one run of ``task`` (default: a task of its own, ``seed``'s), the first with
    ``broken`` unreadable tool calls; and the tool result's span in the second call's prompt."""
    generator = torch.Generator().manual_seed(seed)
    ask = task if task is not None else f"Fix bug #{seed}."
    first_prompt = policy.chat_prompt([{"role": "user", "content": ask}])
    first = policy.sample([first_prompt], PARAMS, generator)[0]
    result = policy.tokenizer(TOOL_RESULT, add_special_tokens=False).input_ids
    prefix = [*first_prompt, *first.token_ids]
    second_prompt = [*prefix, *result]
    second = policy.sample([second_prompt], PARAMS, generator)[0]
    calls = []
    for prompt, done, turn in [
        (first_prompt, first, TurnRef(f"{run}-c1", None, 0, 0, broken)),
        (second_prompt, second, TurnRef(f"{run}-c2", f"{run}-c1", 0, len(prefix))),
    ]:
        calls.append(Rollout(run, info.checkpoint_id, info.model.identity(), PARAMS,
                             tuple(prompt), done.token_ids, done.logprobs, done.finish_reason,
                             TS, turn=turn))  # fmt: skip
    return calls, range(len(prefix), len(second_prompt))
