"""The roof: what a user's mistake looks like, whatever the command."""

from __future__ import annotations

from pathlib import Path

import pytest

from rtrl.cli import main


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["replay", "--events", "/nonexistent/events.jsonl", "--out", "o.parquet"], "events.jsonl"),
        (
            [
                "monitors",
                "--records",
                "/nonexistent/r.parquet",
                "--checkpoint",
                "a",
                "--parent",
                "b",
            ],
            "r.parquet",
        ),
        (["report", "ab", "--experiment", "e", "--warehouse", "{tmp}/none"], "no warehouse at"),
        (["batches", "list", "--warehouse", "{tmp}/none"], "no warehouse at"),
    ],
)
def test_a_missing_input_is_a_sentence_and_exit_2(
    argv: list[str], said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main([a.replace("{tmp}", str(tmp_path)) for a in argv])
    err = capsys.readouterr().err
    assert code == 2 and said in err and err.startswith(f"rtrl {argv[0]}: ")
    assert "Traceback" not in err


def test_an_invalid_reward_config_names_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    events = tmp_path / "events.jsonl"
    main(["workload", "--interactions", "3", "--out", str(events)])
    (tmp_path / "bad.toml").write_text("window_s = -3\n")
    code = main(
        [
            "replay",
            "--events",
            str(events),
            "--out",
            str(tmp_path / "o.parquet"),
            "--reward-config",
            str(tmp_path / "bad.toml"),
        ]
    )
    assert code == 2 and "window_s" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["workload", "--interactions", "0", "--out", "w.jsonl"],
        ["replay", "--events", "e.jsonl", "--out", "o", "--workers", "0"],
    ],
)
def test_counts_below_one_are_refused_by_the_parser(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
