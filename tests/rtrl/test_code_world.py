"""The code world of `rtrl run --world code`, hop by hop.

The rule: code that runs and defines the function asked for is accepted, kept when it passes the
hidden tests and reverted when it does not; a rejected, reverted or missing edit brings a
dissatisfied follow-up; and each outcome earns what reward spec v1 gives it (graded by the real
sandbox, scored by the one reward function).

The run: a small `rtrl run --world code` on the tiny model. For every interaction of the rounds,
the answer the gateway gave (its rollout, decoded) is read again with the harness and graded
again in the sandbox; the rule's reaction must be exactly the events that landed in the
warehouse, and the reward the stream worker computed for the interaction must be what the spec's
terms give for that reaction. The prompt the model saw is the task's own, never a hidden case.
"""

from __future__ import annotations

import json
import os
import re
from collections import defaultdict
from pathlib import Path

import duckdb
import pytest

from agent.harness import Harness, Turn
from agent.sandbox import grade
from agent.tasks import get_task, load_tasks
from agent.telemetry import envelope
from infra.kafka_dist import default_cache_root
from llamacpp.build import server_binary
from rewards import terms
from rewards.config import RewardConfig
from rewards.function import compute_record
from rtrl.report.summary import read_summary
from rtrl.worlds.text_users import Reaction, by_rule, later_events, now_events
from tests.support.kafka import free_port_block
from tests.support.rtrl_run import run_rtrl

HARNESS = Harness()
TASK = get_task("square")


def fenced(code: str) -> str:
    return f"Here it is:\n```python\n{code}\n```\n"


def judged(text: str) -> tuple[Turn, Reaction]:
    turn = HARNESS.read(text)
    code = turn.code()
    return turn, by_rule(turn, grade(code, TASK) if code else None)


def expected_reward(turn: Turn, reaction: Reaction, latency_ms: int) -> float:
    """Reward spec v1 of the rule's reaction, term by term (``rewards.terms``)."""
    config = RewardConfig()
    decision = {True: terms.ACCEPTED, False: terms.REJECTED, None: None}[reaction.accepted]
    score = terms.edit_score(decision, reaction.reverted, reaction.retained_fraction, config)
    invalid = sum(not c.valid for c in turn.tool_calls)
    return terms.total(
        [terms.r_edit([score] * len(turn.edits)), terms.r_followup(reaction.dissatisfied, config),
         terms.r_tool(invalid, config), terms.r_clarify(int(turn.clarifying), len(turn.edits),
                                                        config),
         terms.r_latency(latency_ms, config)],
        config,
    )  # fmt: skip


def scored(turn: Turn, reaction: Reaction, latency_ms: int = 900) -> float | None:
    """The reward function's score of the events the plugin sends (now, then on the second
    look)."""
    events = [*now_events(turn, reaction, latency_ms, 20), *later_events(turn, reaction, 3)]
    stamped = envelope(events, interaction_id="i1", session_id="s1", user_id="u1",
                       org_id="acme", checkpoint_id="c1", ts="2026-12-01T10:00:00Z")  # fmt: skip
    for n, event in enumerate(stamped):
        event["received_at"] = f"2026-12-01T10:00:{n:02d}.000000Z"
    return compute_record(stamped, RewardConfig()).reward


@pytest.mark.parametrize(
    ("text", "accepted", "kept", "reverted", "dissatisfied", "reward"),
    [
        (fenced(TASK.reference), True, True, False, False, 1.991),  # passes: kept
        (fenced("def square(x):\n    return x + x"), True, False, True, True, -1.009),  # runs
        (fenced("def square(x):\n    return x *"), False, False, False, True, -1.509),  # no run
        (fenced("def cube(x):\n    return x ** 3"), False, False, False, True, -1.509),  # other
        ("Multiply x by itself.", None, False, False, True, -1.009),  # no code at all
    ],
    ids=["passes", "runs-but-fails", "syntax-error", "wrong-function", "no-code"],
)
def test_the_rule_accepts_keeps_and_reverts(text, accepted, kept, reverted, dissatisfied, reward):
    turn, reaction = judged(text)
    assert reaction.accepted is accepted
    assert reaction.reverted is reverted and reaction.dissatisfied is dissatisfied
    assert (reaction.retained_fraction == 1.0) is kept
    later = [e.type for e in later_events(turn, reaction, 3)]
    if accepted:  # the fate comes on the second look, with the follow-up after it
        assert later == ["edit.retention" if kept else "edit.reverted", "followup.sent"]
    else:
        assert later == []
        assert now_events(turn, reaction, 900, 20)[-1].payload == {"dissatisfied": True}
    assert scored(turn, reaction) == pytest.approx(reward)
    assert expected_reward(turn, reaction, 900) == pytest.approx(reward)


def test_the_same_code_always_gets_the_same_reaction():
    text = fenced("def square(x):\n    return x * x")
    assert [judged(text)[1] for _ in range(3)] == [judged(text)[1]] * 3


LLAMA_SERVER = server_binary(default_cache_root(os.environ))
ENGINES = [
    pytest.param("tiny", "transformers", id="tiny-transformers"),
    pytest.param("smollm2-135m", "llama.cpp", id="smollm2-llamacpp", marks=pytest.mark.skipif(
        not LLAMA_SERVER.is_file(), reason=f"llama-server is not built at {LLAMA_SERVER}")),
]  # fmt: skip


@pytest.mark.slow
@pytest.mark.timeout(960)  # SmolLM2's run took 450 s and 540+ s in two quiet full runs
@pytest.mark.parametrize(("model", "engine"), ENGINES)
def test_code_world_run_every_hop_from_answer_to_reward(
    tmp_path: Path, model: str, engine: str
) -> None:
    """With the transformers sampler on the tiny model, and with llama.cpp's server on SmolLM2
    (its GGUF file as it is, the rollouts' ids and log-probs from the engine's answers)."""
    kafka_port, http_port = free_port_block(2), free_port_block(2)  # collector, gateway
    done = run_rtrl(
        ["--world", "code", "--port", str(kafka_port), "--collector-port", str(http_port),
         "--gateway-port", str(http_port + 1), "--interactions", "30", "--window-s", "4",
         "--rounds", "1", "--extra-rounds", "0", "--round-users", "12", "--ab-users", "0",
         "--held-out-samples", "1", "--gate-eval-samples", "1", "--max-tokens", "24",
         "--seed", "1", "--model", model, "--engine", engine],
        tmp_path, timeout_s=900)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "held-out pass rate" in done.stderr and "code passing the hidden tests" in done.stderr
    # the held-out evals sample with the engine the users are served by
    evals_by = re.findall(r"held-out eval of \S+ \(\w+\): .* in \d+s(.*)", done.stderr)
    assert evals_by and set(evals_by) == {" (llama.cpp)" if engine == "llama.cpp" else ""}
    assert "training rounds (code world" in done.stdout
    served_by = (tmp_path / "logs" / "gateway.log").read_text()
    assert f"({'llama.cpp engine' if engine == 'llama.cpp' else 'local'} backend" in served_by

    from checkpoints.store import CheckpointRegistry
    from checkpoints.weights import load_policy

    registry = CheckpointRegistry(tmp_path / "checkpoints")
    prefix = model.split("-")[0]
    tokenizer = load_policy(registry, registry.get(f"{prefix}-0000")).tokenizer
    with duckdb.connect(str(tmp_path / "warehouse" / "warehouse.duckdb"), read_only=True) as con:
        rollouts = [json.loads(r) for (r,) in con.execute(
            "select rollout_json from stg_rollouts").fetchall()]  # fmt: skip
        rows = con.execute(
            "select event_type, interaction_id, edit_id, dissatisfied, retained_fraction, "
            "latency_ms from stg_events").fetchall()  # fmt: skip
        rewards = dict(con.execute("select interaction_id, reward from rewards "
                                   "where status = 'scored'").fetchall())  # fmt: skip
    events: dict[str, list[tuple]] = defaultdict(list)
    for row in rows:
        events[row[1]].append(row)
    # two rounds of 12 users, each answer published once, but for an answer llama.cpp gave no
    # id for every token of (one ending inside a multi-byte character): refused, counted, logged
    refused = re.findall(r"rollout of \S+ refused: (\w+)", served_by)
    assert set(refused) <= {"missing_token_ids", "missing_logprobs"}, refused
    assert len(rollouts) + len(refused) == 24 and len(refused) <= 2, refused

    easy = {t.prompt: t for t in load_tasks("easy")}
    hidden = [json.dumps(c.expected) for t in load_tasks("easy", "held_out") for c in t.cases
              if c.expected is not None and len(json.dumps(c.expected)) > 3]  # fmt: skip
    outcomes = set()
    for rollout in rollouts:
        interaction = rollout["interaction_id"]
        prompt = tokenizer.decode(rollout["prompt_ids"])
        (task,) = [t for p, t in easy.items() if p in prompt]  # the task's prompt, an easy one
        assert not any(h in prompt for h in hidden)  # no hidden expected value in the input
        text = tokenizer.decode(rollout["completion_ids"], skip_special_tokens=True)
        turn = HARNESS.read(text)  # the harness, again, on what the gateway answered
        code = turn.code()
        reaction = by_rule(turn, grade(code, task) if code else None)  # the sandbox, again
        outcomes.add((reaction.accepted, reaction.reverted))
        mine = events[interaction]
        types = sorted(e[0] for e in mine)
        verdict = {True: "edit.accepted", False: "edit.rejected", None: None}[reaction.accepted]
        assert types.count("agent.edit_proposed") == len(turn.edits)
        assert types.count(verdict) == (len(turn.edits) if verdict else 0), (text, types)
        assert types.count("edit.reverted") == (len(turn.edits) if reaction.reverted else 0)
        kept = bool(reaction.accepted) and not reaction.reverted
        assert types.count("edit.retention") == (len(turn.edits) if kept else 0)
        followups = [e[3] for e in mine if e[0] == "followup.sent"]
        assert any(followups) is reaction.dissatisfied, (text, types)
        (latency,) = [e[5] for e in mine if e[0] == "interaction.completed"]
        assert rewards[interaction] == pytest.approx(expected_reward(turn, reaction, latency))
    assert outcomes  # every interaction of the rounds was judged and scored

    summary = read_summary(tmp_path / "summary.json")
    assert summary.world == "code" and len(summary.rounds) == 2
    # the refused rollouts are counted per round in the summary, as the gateway logged them
    assert [r.rollouts_refused is not None for r in summary.rounds] == [True, True]
    assert sum(r.rollouts_refused or 0 for r in summary.rounds) == len(refused), refused
    first = summary.rounds[0]
    assert first.held_out_pass_rate is not None and first.edits_kept_share is not None
    assert first.gate_decision in ("promoted", "rejected")
    # the candidate was trained with the code world's learner, not a token-world scenario's
    candidate = registry.get(f"{prefix}-0001").evals
    assert candidate["learner"]["lr"] == 0.0004, candidate["learner"]
    assert candidate["learner"]["target_kl"] == 0.006, candidate["learner"]
    # the learner scored the served rollouts as they were sampled: the engine's too
    assert not candidate["quarantined"], candidate["mismatch"]
    assert [m["k3"] < 0.02 for m in candidate["mismatch"].values()] == [True], candidate
    # so exactly that the update took them as pi_old, with no scoring pass first
    assert candidate["update"]["old_logprobs"] == "behaviour", candidate["mismatch"]
    # and its candidate evals were sampled by the users' engine
    assert candidate["candidate_evals_by"] == (
        "llama.cpp" if engine == "llama.cpp" else "transformers"
    ), candidate["candidate_evals_by"]
    # its candidate evals run on the held-out tasks, pair by pair (5 tasks, 1 answer each), once
    # the gate's cheap checks passed; a candidate its bound (or KL, ESS, a monitor) rejects is
    # not sampled for them (they could not save it: tests/trainer, "doomed"; the llama.cpp
    # sampling of the evals: tests/serving/test_llamacpp_switch.py)
    assert candidate["gate_config"]["eval_tasks"] == "held_out"
    evals = {e["metric"]: e for e in candidate["candidate_evals"]}
    if evals:
        assert evals["task_pass_rate"]["n"] == len(load_tasks("held_out")), evals
        assert all(e["discordant"] is not None for e in evals.values()), evals
    else:
        assert first.gate_decision == "rejected", candidate["gate"]
    # every checkpoint's held-out pass rate, the candidate's too (measured after the next users)
    assert all(c.held_out_pass_rate is not None for c in summary.checkpoints), summary
    # and the round's record says where its time went
    assert {"load", "update", "gate_scoring", "candidate_evals"} <= set(candidate["seconds"])
