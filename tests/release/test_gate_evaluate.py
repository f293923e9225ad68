"""`rtrl gate evaluate`: a decision recomputed from evidence files (JSON lines or Parquet), one
per file, the same figures as the gate's own, without torch; and a registered round's decision
re-run from the evidence its checkpoint holds, to the last digit."""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys

import numpy as np
import polars as pl
import pytest

from release.evidence import EvidenceRow, estimate_rows, method_for, read_evidence, write_evidence
from release.gate import GateConfig, attempt_level, decide
from release.offpolicy_bound import CENTRED_METHOD, METHOD
from rtrl.cli import main
from tests.release.worlds import COLLAPSE, NULL_WORLDS, Draw

KEYS = ["file", "passed", "estimate", "gain", "lower", "level", "ess", "kl", "n", "users",
        "method", "reasons"]  # fmt: skip


def rows_of(draw: Draw, reward_shift: float = 0.0) -> list[EvidenceRow]:
    return [
        EvidenceRow(
            f"u{int(u)}",
            f"i{k}",
            float(r) + reward_shift,
            tuple(b.tolist()),
            tuple(c.tolist()),
            f"s{int(u) % 3}",
        )  # fmt: skip
        for k, (u, r, b, c) in enumerate(
            zip(
                draw.users,
                draw.rewards,
                draw.behaviour_logprobs,
                draw.candidate_logprobs,
                strict=True,
            )
        )  # fmt: skip
    ]


@pytest.fixture
def collapse_rows() -> list[EvidenceRow]:
    rng = np.random.default_rng(11)
    return rows_of(COLLAPSE.draw(rng, COLLAPSE.population(rng)))


def _evaluate(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[dict]]:
    code = main(["gate", "evaluate", "--json", *argv])
    lines = capsys.readouterr().out.splitlines()
    return code, [json.loads(line) for line in lines]


def test_one_json_line_per_file_with_the_gates_figures(tmp_path, capsys, collapse_rows):
    rng = np.random.default_rng(12)
    world = NULL_WORLDS[0]
    null_rows = rows_of(world.draw(rng, world.population(rng)))
    jsonl = write_evidence(tmp_path / "collapse.jsonl", collapse_rows)
    parquet = tmp_path / "null.parquet"
    pl.DataFrame([r.to_json_dict() for r in null_rows]).write_parquet(parquet)
    range_ = ["--reward-min", "0", "--reward-max", "1"]
    code, out = _evaluate(capsys, "--evidence", str(jsonl), str(parquet), *range_)
    assert [list(o)[: len(KEYS)] for o in out] == [KEYS, KEYS]
    assert [o["file"] for o in out] == [str(jsonl), str(parquet)]
    collapse = out[0]
    assert not collapse["passed"] and collapse["gain"] < 0 and code == 3
    assert collapse["method"] == METHOD and collapse["df"] > 1
    assert (collapse["reward_min"], collapse["reward_max"]) == (0.0, 1.0)
    assert collapse["users"] == len({r.user_id for r in collapse_rows})
    assert collapse["level"] == attempt_level(0.95, 1)
    assert collapse["attempt"] == 1 and collapse["attempt_assumed"]  # a file does not say
    # the same figures as the gate computes in a round, from the same rows
    config = GateConfig(reward_min=0.0, reward_max=1.0)
    estimate = estimate_rows(collapse_rows, level=attempt_level(0.95, 1), resamples=2000, seed=0,
                             weight_cap=10.0, reward_min=0.0, reward_max=1.0)  # fmt: skip
    decision = decide(estimate, [], config)
    assert collapse["lower"] == estimate.lower and collapse["kl"] == estimate.kl
    assert collapse["reasons"] == list(decision.reasons)
    assert out[1]["n"] == len(null_rows)


def test_a_later_attempt_is_judged_at_its_share_of_alpha(tmp_path, capsys, collapse_rows):
    path = write_evidence(tmp_path / "e.jsonl", collapse_rows)
    _, (first,) = _evaluate(capsys, "--evidence", str(path), "--reward-min", "0", "--reward-max",
                            "1")  # fmt: skip
    _, (third,) = _evaluate(capsys, "--evidence", str(path), "--reward-min", "0", "--reward-max",
                            "1", "--attempt", "3")  # fmt: skip
    assert third["level"] == pytest.approx(1 - 0.05 * 6 / (np.pi**2 * 9))
    assert "attempt_assumed" not in third
    assert third["lower"] < first["lower"]


def test_a_reward_outside_the_stated_range_and_a_bad_row_are_refused(tmp_path, capsys,
                                                                     collapse_rows):  # fmt: skip
    path = write_evidence(tmp_path / "e.jsonl", collapse_rows)
    assert main(["gate", "evaluate", "--evidence", str(path), "--reward-min", "0",
                 "--reward-max", "0.5"]) == 2  # fmt: skip
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"user_id": "u", "interaction_id": "i", "reward": 1}\n')
    with pytest.raises(ValueError, match="line 1: missing"):
        read_evidence(bad)


def test_the_range_comes_from_the_reward_configuration(tmp_path, capsys, collapse_rows):
    """Rewards of a configuration that pays 3 for an accepted edit reach 4 (an edit fully
    retained): refused under reward v1's default range, judged under the file's, and the
    range used is in the output."""
    rng = np.random.default_rng(13)
    draw = COLLAPSE.draw(rng, COLLAPSE.population(rng))
    path = write_evidence(tmp_path / "e.jsonl", rows_of(draw, reward_shift=3.0))
    assert main(["gate", "evaluate", "--evidence", str(path)]) == 2  # 4 is above 2
    capsys.readouterr()
    config = tmp_path / "reward.toml"
    config.write_text("[reward]\naccept = 3.0\n")
    code, (out,) = _evaluate(capsys, "--evidence", str(path), "--reward-config", str(config))
    assert (out["reward_min"], out["reward_max"]) == (-4.1, 4.0) and code == 3
    # an explicit end overrides the configuration's (the shift is by the lower end)
    _, (wide,) = _evaluate(capsys, "--evidence", str(path), "--reward-config", str(config),
                           "--reward-min", "-10")  # fmt: skip
    assert wide["reward_min"] == -10.0 and wide["reward_max"] == 4.0
    assert wide["lower"] != out["lower"]


def test_users_without_an_id_go_by_session_then_alone() -> None:
    rows = [
        EvidenceRow(None, "i1", 0.0, (), (), "s1"),
        EvidenceRow(None, "i2", 0.0, (), (), "s1"),
        EvidenceRow(None, "i3", 0.0, (), ()),
        EvidenceRow("u", "i4", 0.0, (), (), "s1"),
    ]
    assert [r.unit for r in rows] == ["session:s1", "session:s1", "interaction:i3", "user:u"]
    est = estimate_rows(rows, level=0.9, resamples=100, seed=0, weight_cap=10, reward_min=0,
                        reward_max=1)  # fmt: skip
    assert est.users == 3 and est.n == 4


def test_evaluate_imports_no_torch(tmp_path, collapse_rows):
    path = write_evidence(tmp_path / "e.jsonl", collapse_rows)
    code = (
        "import sys\n"
        "from rtrl.cli import main\n"
        f"code = main(['gate', 'evaluate', '--json', '--evidence', {str(path)!r}])\n"
        "print('TORCH', 'torch' in sys.modules, code)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines()[-1] == "TORCH False 3"
    assert json.loads(out.stdout.splitlines()[0])["n"] == len(collapse_rows)


def test_a_rounds_decision_is_reproduced_from_its_evidence(registry, tmp_path, capsys) -> None:
    from checkpoints.weights import load_policy
    from tests.support.checkpoints import serve, write_batch
    from tests.support.rounds import round_options
    from trainer.learner import LearnerConfig
    from trainer.train import train_round

    root = registry.get("t-0000")
    batch = write_batch(tmp_path / "b.parquet", serve(load_policy(registry, root), root, 120, 0))
    frame = pl.read_parquet(batch)  # 15 users, 8 interactions each, every 4th one censored
    users = [f"u{k % 15}" for k in range(frame.height)]
    rewards = [None if k % 4 == 3 else r for k, r in enumerate(frame["reward"])]
    nulled = pl.Series("reward", rewards, dtype=pl.Float64)
    frame.with_columns(pl.Series("user_id", users), nulled).write_parquet(batch)
    learner = LearnerConfig(lr=5e-3, epochs=1, minibatches=2, micro_batch=32)
    gate = GateConfig(min_gain=-100, max_kl=100, min_users=2, eval_prompts=0)
    first, second = (
        train_round(
            registry,
            "t-0000",
            [("b", [batch])],
            candidate,
            round_options(registry, learner, gate),
            alarms=[],
        )  # fmt: skip
        for candidate in ("t-0001", "t-0002")
    )
    assert first is not None and second is not None
    for result, attempt in ((first, 1), (second, 2)):
        info = result.candidate
        evidence = read_evidence(info.file(info.evals["evidence"]["file"]))
        held = {r.user_id for r in evidence}
        assert len(evidence) == result.n_held_out and len(held) == result.estimate.users
        assert info.evals["gate"]["attempt"] == attempt
        assert info.evals["gate"]["level"] == attempt_level(0.95, attempt)
        code, (out,) = _evaluate(capsys, "--checkpoint", info.checkpoint_id, "--registry",
                                 str(registry.root))  # fmt: skip
        assert out["reproduced"] is True and code == (0 if info.status == "promoted" else 3)
        assert out["method"] == info.evals["gate"]["method"] == method_for(evidence)
        assert method_for(evidence) == CENTRED_METHOD  # served at top_p 1: every token drawable
        assert (info.evals["gate"]["reward_min"], info.evals["gate"]["reward_max"]) == (-4.1, 2.0)
        assert out["lower"] == info.evals["gate"]["lower"]
        assert out["estimate"] == info.evals["gate"]["value"]
        # whole users are held out: all 8 interactions of each held-out user, none trained on;
        # the censored ones stay in the evidence, never in training
        assert result.n_held_out == 8 * len(held)
        censored = sum(r.reward is None for r in evidence)
        assert censored == info.evals["n_held_out_censored"] == out["censored"] > 0
        assert info.evals["n_train"] == 90 - (result.n_held_out - censored)


def test_censored_rows_are_read_and_judged(tmp_path, capsys):
    """A null reward is a censored interaction: read, kept and counted; a non-number is not."""
    from tests.release.worlds import CENSORED_DRIFT

    rng = np.random.default_rng(14)
    draw = CENSORED_DRIFT.draw(rng, CENSORED_DRIFT.population(rng))
    rows = [dataclasses.replace(r, reward=None if math.isnan(r.reward) else r.reward)
            for r in rows_of(draw)]  # fmt: skip
    path = write_evidence(tmp_path / "e.jsonl", rows)
    assert [r.reward for r in read_evidence(path)] == [r.reward for r in rows]
    code, (out,) = _evaluate(capsys, "--evidence", str(path), "--reward-min", "0",
                             "--reward-max", "1")  # fmt: skip
    assert out["censored"] == int(np.isnan(draw.rewards).sum()) > 100 and out["n"] == len(rows)
    assert code == 3 and out["gain"] < 0
    bad = tmp_path / "bad.jsonl"
    bad.write_text(path.read_text().replace('"reward":null', '"reward":"none"', 1))
    with pytest.raises(ValueError, match="finite number or null"):
        read_evidence(bad)


def test_the_centred_bound_only_for_rows_served_with_full_support(tmp_path, collapse_rows):
    """Rows say whether their sampling could draw every token; the centred, untruncated bound is
    taken only when all of them could (a nucleus hides mass it would credit with the mean
    reward), and asking for it on other rows is refused."""
    full = [dataclasses.replace(r, full_support=True) for r in collapse_rows]
    assert method_for(collapse_rows) == METHOD and method_for(full) == CENTRED_METHOD
    mixed = [*full[1:], collapse_rows[0]]
    assert method_for(mixed) == METHOD
    options = dict(level=0.95, resamples=0, seed=0, weight_cap=10.0, reward_min=0.0,
                   reward_max=1.0)  # fmt: skip
    with pytest.raises(ValueError, match="full support"):
        estimate_rows(mixed, method=CENTRED_METHOD, **options)
    again = read_evidence(write_evidence(tmp_path / "full.jsonl", full))
    assert again == full and estimate_rows(again, **options).method == CENTRED_METHOD
    assert estimate_rows(again, **options).clipped == 0
