#!/usr/bin/env python3
"""What the gateway's memory of answers costs (``serving.trajectory.AnswerMemory``): bytes per
remembered answer and per token, at its default bound, and the time to recognise a call and to
remember its answer, beside the time to render the same history as a digest alone (the floor:
recognition must at least read the history once).

Simulated agent runs, as an agent sends them: each run a user task, then ``--calls`` calls, each
answer a tool call with ``--completion`` tokens and each result adding ``--env`` tokens; the
memory holds ``--answers`` answers (the gateway's default bound, 50,000). Memory is measured
with tracemalloc (Python's own allocations: the arrays of token ids, the answers, the indexes),
after a full collection. Figures to stdout and ``bench/out/answer_memory.json``.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
import tracemalloc
from array import array
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import format_table, machine, reexec_in_venv, write_results  # noqa: E402

reexec_in_venv(__file__)

from serving.trajectory import Answer, AnswerMemory, digest  # noqa: E402


def _call(run: int, call: int) -> dict:
    arguments = json.dumps({"path": f"f{call}.py"})
    return {"id": f"call_{run:08x}{call:04x}", "type": "function",
            "function": {"name": "read_file", "arguments": arguments}}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answers", type=int, default=50_000, help="answers remembered")
    parser.add_argument("--calls", type=int, default=8, help="calls per agent run")
    parser.add_argument("--completion", type=int, default=60, help="model tokens per answer")
    parser.add_argument("--env", type=int, default=200, help="tool-result tokens per call")
    args = parser.parse_args()
    runs = args.answers // args.calls
    tracemalloc.start()
    gc.collect()
    base = tracemalloc.get_traced_memory()[0]
    memory = AnswerMemory(max_answers=args.answers)
    recognise_s = remember_s = digest_s = 0.0
    tokens = 0
    for run in range(runs):
        history: list[dict] = [{"role": "user", "content": f"task {run}: fix the failing test"}]
        parent = None
        for call in range(args.calls):
            started = time.perf_counter()
            seen = memory.recognise(history, None, f"user{run}", None)
            recognise_s += time.perf_counter() - started
            started = time.perf_counter()
            context = digest(history)
            digest_s += time.perf_counter() - started
            assert (seen.parent is parent) or call == 0
            new = args.env + args.completion if call else 400 + args.completion
            tool_call = _call(run, call)
            answer = Answer(
                call_id=f"chatcmpl-{run}-{call}",
                interaction_id=f"i{run}",
                scope=f"user{run}",
                segment=0,
                context=context,
                content="",
                calls=((tool_call["id"], "read_file", json.dumps({"path": f"f{call}.py"})),),
                new_ids=array("i", range(new)),
                completion_len=args.completion,
                finish_reason="stop",
                checkpoint_id="c0",
                tokenizer="t" * 64,
                parent=parent,
            )
            started = time.perf_counter()
            memory.remember(answer)
            remember_s += time.perf_counter() - started
            tokens += new
            parent = answer
            history += [
                {"role": "assistant", "content": None, "tool_calls": [tool_call]},
                {"role": "tool", "tool_call_id": tool_call["id"], "content": "x" * 400},
            ]
    gc.collect()
    used = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    calls = runs * args.calls
    row = {
        "answers": len(memory),
        "tokens": tokens,
        "mib": used / 2**20,
        "bytes_per_answer": used / len(memory),
        "bytes_per_token": used / tokens,
        "recognise_us": 1e6 * recognise_s / calls,
        "digest_us": 1e6 * digest_s / calls,
        "remember_us": 1e6 * remember_s / calls,
    }
    print(
        format_table(
            ["answers", "tokens", "MiB", "B/answer", "B/token", "recognise us", "digest alone us",
             "remember us"],
            [[row["answers"], row["tokens"], row["mib"], row["bytes_per_answer"],
              row["bytes_per_token"], row["recognise_us"], row["digest_us"],
              row["remember_us"]]],
        )
    )  # fmt: skip
    path = write_results("answer_memory", {"benchmark": "answer_memory", "machine": machine(),
                                           "settings": vars(args), **row})  # fmt: skip
    print(f"-> {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
