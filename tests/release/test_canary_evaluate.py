"""`rtrl canary evaluate --evidence`: a canary's course re-run from an evidence file written by
another tool (the format of docs/contracts/canary-evidence-v1.md), with what-if flags; the
live path's own evidence is re-run in test_canary_lifecycle.py."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from release.canary_evidence import read_evidence
from rtrl.cli import main

START = datetime(2026, 11, 1, tzinfo=UTC)


def _time(hours: float) -> str:
    return (START + timedelta(hours=hours)).isoformat().replace("+00:00", "Z")


def write_file(path: Path, canary_shift: float, seed: int = 1, users: int = 800) -> Path:
    """``users`` users arriving over ten days, 20 % on the canary, three interactions each in
    their first day, rewards in [-2, 3] landing an hour later (one in twenty censored), the
    canary's rewards shifted by ``canary_shift``; a look every 12 hours for 16 days."""
    rng = random.Random(seed)
    header = {
        "kind": "rtrl.canary-evidence", "version": 1, "experiment": "canary-x",
        "started_at": _time(0), "look_times": [_time(12 * k) for k in range(1, 33)],
        "shares": [{"from": _time(0), "percent": 20.0}],
        "config": {"percent": 20.0, "min_users": 30, "margin": 0.3, "tuning_users": 800,
                   "reward_min": -2.0},
    }  # fmt: skip
    lines = [json.dumps(header)]
    for u in range(users):
        arm = "canary" if rng.random() < 0.2 else "parent"
        first = rng.uniform(0, 240)
        for k in range(3):
            at = first + rng.uniform(0, 20) * (k > 0)
            reward = (
                None
                if rng.random() < 0.1
                else rng.gauss(0.5, 0.6) + (canary_shift if arm == "canary" else 0.0)
            )
            lines.append(json.dumps({
                "interaction_id": f"i{u}-{k}", "revision": 0, "user_id": f"u{u}", "arm": arm,
                "at": _time(at), "landed_at": _time(at + 1), "reward": reward,
                "invalid_tool_calls": int(rng.random() < 0.05)}))  # fmt: skip
    path.write_text("\n".join(lines) + "\n")
    return path


def _evaluate(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict]:
    code = main(["canary", "evaluate", "--json", *argv])
    (line,) = capsys.readouterr().out.splitlines()
    return code, json.loads(line)


def test_a_canary_no_worse_than_the_margin_is_rolled_out_after_the_minimum_exposure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_file(tmp_path / "e.jsonl", canary_shift=0.0)
    header, rows = read_evidence(path)
    assert len(rows) == 2400 and sum(r.reward is None for r in rows) > 60
    code, out = _evaluate(capsys, "--evidence", str(path))
    assert (code, out["decision"]) == (0, "rollout")
    decided = datetime.fromisoformat(out["decided_at"].replace("Z", "+00:00"))
    assert decided - START >= timedelta(hours=168)  # the default minimum exposure: a week
    assert out["bound"]["low"] > -0.3
    # what-ifs: without a minimum exposure it is decided earlier; with a tiny margin never
    _, early = _evaluate(capsys, "--evidence", str(path), "--min-exposure", "0")
    assert early["decision"] == "rollout" and early["looks"] < out["looks"]
    code, strict = _evaluate(capsys, "--evidence", str(path), "--margin", "0.001",
                             "--deadline", "300")  # fmt: skip
    assert strict["decision"] == "rollback" and code == 3
    assert "deadline of 300 h passed" in strict["reason"]


def test_a_worse_canary_is_rolled_back_whatever_the_exposure(tmp_path, capsys) -> None:
    path = write_file(tmp_path / "e.jsonl", canary_shift=-0.8, seed=2)
    code, out = _evaluate(capsys, "--evidence", str(path))
    assert (code, out["decision"]) == (3, "rollback")
    assert "live reward worse" in out["reason"]
    decided = datetime.fromisoformat(out["decided_at"].replace("Z", "+00:00"))
    assert decided - START < timedelta(hours=168)  # a rollback needs no minimum exposure


def test_a_bad_file_is_refused_naming_its_line(tmp_path, capsys) -> None:
    path = write_file(tmp_path / "e.jsonl", canary_shift=0.0)
    lines = path.read_text().splitlines()
    lines[5] = (
        lines[5]
        .replace('"arm": "canary"', '"arm": "treatment"')
        .replace('"arm": "parent"', '"arm": "treatment"')
    )
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    assert main(["canary", "evaluate", "--evidence", str(bad)]) == 2
    with pytest.raises(ValueError, match="line 6: arm must be"):
        read_evidence(bad)
    headless = tmp_path / "headless.jsonl"
    headless.write_text("\n".join(lines[1:]) + "\n")
    with pytest.raises(ValueError, match="line 1: not a canary evidence header"):
        read_evidence(headless)


def test_each_period_of_a_constant_share_is_tested_on_its_own() -> None:
    """1,000 users assigned at 10 %, then 1,000 at 50 %: each period's split is right, and the
    check of each period on its own users finds none; all 2,000 against one 10 % share is a
    mismatch (and against their pooled 30 % the check would be blind to a broken period)."""
    from release.canary_config import CanaryConfig
    from release.canary_evidence import Row, Share
    from release.canary_replay import look_at
    from rewards.monitors import MonitorThresholds

    rng = random.Random(3)
    rows = []
    for u in range(2000):
        share = 0.1 if u < 1000 else 0.5
        at = START + timedelta(hours=u * 24 / 1000)
        arm = "canary" if rng.random() < share else "parent"
        rows.append(Row(f"i{u}", 0, f"u{u}", arm, at, at + timedelta(hours=1), 1.0))
    config = CanaryConfig(percent=50.0, user_window_hours=0)
    t = START + timedelta(hours=72)
    two = [Share(since=START, percent=10.0), Share(since=START + timedelta(hours=24), percent=50.0)]
    fine = look_at(rows, t, START, config, MonitorThresholds(), 1, two)
    assert not fine.srm.mismatch and sum(fine.srm.observed) == 1000
    one = look_at(
        rows, t, START, config, MonitorThresholds(), 1, [Share(since=START, percent=10.0)]
    )
    assert one.srm.mismatch and one.verdict == "rollback"
    assert "sample ratio mismatch" in one.reasons[0]
