#!/usr/bin/env python3
"""SmolLM2's pass rate on the agent world's tasks when its first call is a constrained
``write_file``: the figure the agent world's task list is chosen by.

Each task's first request is rendered as the gateway renders it (``serving.protocol``: the
system message, the worked example, the task, the agent's closed tool schemas, one call) and
sampled on the transformers backend's own path (``CausalLMPolicy.sample`` under the grammar of
``tool_choice`` naming ``write_file``: ``models.constraint``), at the agent world's temperature
and token budget. Each answer is read for its call (``models.tool_format.parse_calls``) and the
file it writes is graded by the task's hidden cases in the sandbox. Per task the passes, the
calls that closed within the budget, and the tokens the longest one took; the tasks solved
20-50 % of the time are the ones the agent world serves. To stdout and
``bench/out/agent_pass_rate.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, reexec_in_venv, write_results  # noqa: E402
from task_pass_rate import wilson  # noqa: E402

reexec_in_venv(__file__)
os.environ.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})


def first_request(task: Any, tool_choice: Any) -> Any:
    """The agent's first request on ``task``, as the gateway parses it."""
    from agent.tool_agent import EXAMPLE, SYSTEM, task_message, tool_definitions
    from serving.protocol import ChatCompletionRequest

    messages = [{"role": "system", "content": SYSTEM}, *EXAMPLE,
                {"role": "user", "content": task_message(task)}]  # fmt: skip
    return ChatCompletionRequest.model_validate({
        "model": "default", "messages": messages, "tools": tool_definitions(constrained=True),
        "tool_choice": tool_choice, "parallel_tool_calls": False,
    })  # fmt: skip


def main() -> int:
    import torch

    from agent.sandbox import grade
    from agent.tasks import load_tasks
    from agent.tool_schemas import CALL_MAX_TOKENS, FIRST_TOOL, constrained_tools
    from models.catalog import models_dir, resolve
    from models.constraint import tool_call_constraint
    from models.loading import load_base
    from models.policy import CausalLMPolicy
    from models.sampling import SamplingParams
    from models.tool_format import parse_calls

    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--model", default="smollm2-135m", help="a catalog name or a local path")
    p.add_argument("--groups", nargs="+", default=["easy"])
    p.add_argument("--tasks", nargs="*", default=[], help="only these tasks (default: all)")
    p.add_argument("--samples", type=int, default=8, help="answers per task")
    p.add_argument("--max-tokens", type=int, default=CALL_MAX_TOKENS)
    p.add_argument("--temperature", type=float, default=0.7)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    torch.set_num_threads(args.threads)

    base = load_base(resolve(args.model, models_dir()))
    policy = CausalLMPolicy(base.model, base.tokenizer)
    params = SamplingParams(max_tokens=args.max_tokens, temperature=args.temperature)
    choice = {"type": "function", "function": {"name": FIRST_TOOL}}
    tools = constrained_tools()
    constraint = tool_call_constraint(tools, choice, parallel=False)
    per_task: dict[str, dict[str, int]] = {}
    started = time.perf_counter()
    for group in args.groups:
        for task in load_tasks(group):  # type: ignore[arg-type]
            if args.tasks and task.function not in args.tasks:
                continue
            prompt = policy.chat_prompt(first_request(task, choice).prompt_messages())
            generator = torch.Generator().manual_seed(args.seed)
            answers = policy.sample([prompt] * args.samples, params, generator,
                                    constraints=[constraint] * args.samples)  # fmt: skip
            passed = closed = 0
            for answer in answers:
                calls = parse_calls(answer.text, tools, parallel=False).calls
                if answer.finish_reason != "length" and calls:
                    closed += 1
                    content = json.loads(calls[0].arguments)["content"]
                    passed += grade(content, task).passed
            longest = max(len(a.token_ids or ()) for a in answers)
            per_task[task.function] = {"passed": passed, "closed": closed, "longest": longest}
            wall = time.perf_counter() - started
            print(f"{task.function}: {passed}/{args.samples} pass, {closed} closed, longest "
                  f"{longest} tokens ({wall:.0f} s)", flush=True)  # fmt: skip
    n = args.samples * len(per_task)
    k = sum(t["passed"] for t in per_task.values())
    closed = sum(t["closed"] for t in per_task.values())
    low, high = wilson(k, n)
    chosen = [f for f, t in per_task.items() if 0.2 <= t["passed"] / args.samples <= 0.5]
    print(f"all: {k}/{n} pass = {k / n:.1%} (95 % CI {low:.1%}-{high:.1%}); closed {closed}/{n}; "
          f"solved 20-50 %: {', '.join(chosen)}")  # fmt: skip
    write_results("agent_pass_rate", {
        "machine": machine(), "args": vars(args), "per_task": per_task, "passed": k,
        "answers": n, "closed": closed, "ci95": [low, high], "chosen": chosen,
        "wall_s": time.perf_counter() - started,
    })  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
