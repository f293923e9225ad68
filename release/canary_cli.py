"""`rtrl canary evaluate`: a canary's whole course re-run from its evidence, without the model.

Every look of a live canary (``rtrl canary decide``) rewrites its evidence
(``release.canary_evidence``) beside the checkpoint; ``--checkpoint ID`` re-runs the course at
the recorded look times with the recorded settings and says whether it reaches the recorded
decision at the same look. ``--evidence FILE`` re-runs any evidence file (another tool can
write one), with what-if flags over the settings its header records. Imports no torch.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

from infra.settings_cli import add_command
from release.cli_options import CANARY_EVALUATE_OPTIONS

log = logging.getLogger("rtrl.canary")
EXIT_ROLLED_BACK = 3
_OUTCOMES = {"rolled_out": "rollout", "rolled_back": "rollback", None: "undecided"}


def register(csub: argparse._SubParsersAction) -> None:
    add_command(
        csub,
        "evaluate",
        _evaluate,
        CANARY_EVALUATE_OPTIONS,
        help="re-run a canary's course from its evidence file (or a checkpoint's)",
        description="Replays a canary look by look from its evidence: JSON lines, a header "
        "(experiment, start, look times, shares, the canary's settings) then one row per reward "
        "revision (interaction_id, revision, user_id, arm, at, landed_at, reward or null, "
        "stratum, optional invalid_tool_calls, clarifying, edits); docs/contracts/"
        "canary-evidence-v1.md has the format. Exit 0 when every file ends rolled out or "
        f"undecided, {EXIT_ROLLED_BACK} when one is rolled back, 2 on a bad file.",
    )


def _evaluate(args: argparse.Namespace) -> int:
    import orjson

    from release.canary_evidence import read_evidence
    from release.canary_replay import config_of, replay

    options = CANARY_EVALUATE_OPTIONS.read(args)
    overrides = options.overrides()
    if not options.evidence and not options.checkpoint:
        log.error("give --evidence FILE or --checkpoint ID")
        return 2
    outcomes: list[dict[str, Any]] = []
    try:
        for path in options.evidence:
            header, rows = read_evidence(path)
            course = replay(header, rows, config_of(header, overrides))
            outcomes.append({"file": str(path), **course.to_json()})
        for checkpoint in options.checkpoint:
            outcomes.append(_rerun(options.registry, checkpoint))
    except (OSError, ValueError) as exc:
        log.error("%s", exc)
        return 2
    for outcome in outcomes:
        if options.json:
            print(orjson.dumps(outcome).decode())
        else:
            print(_render(outcome))
    return EXIT_ROLLED_BACK if any(o["decision"] == "rollback" for o in outcomes) else 0


def _rerun(registry_dir: Path, checkpoint_id: str) -> dict[str, Any]:
    """A canary's recorded course re-run from its stored evidence, with whether it reproduces
    the recorded decision at the same look."""
    from checkpoints.store import CheckpointRegistry
    from release.canary_evidence import FILE, read_evidence
    from release.canary_replay import config_of, replay

    info = CheckpointRegistry(registry_dir).get(checkpoint_id)
    stage = info.evals.get("canary")
    if not stage or stage.get("evidence") != FILE:
        raise ValueError(f"{checkpoint_id} has no canary evidence to re-run")
    header, rows = read_evidence(info.file(FILE))
    course = replay(header, rows, config_of(header))
    recorded = _OUTCOMES.get(stage.get("outcome"), "undecided")
    return {"file": str(info.file(FILE)), "checkpoint": checkpoint_id, **course.to_json(),
            "recorded": recorded, "recorded_looks": stage.get("looks"),
            "reproduced": course.decision == recorded
            and course.looks == stage.get("looks")}  # fmt: skip


def _render(outcome: dict[str, Any]) -> str:
    bound = outcome.get("bound") or {}
    low, high = bound.get("low"), bound.get("high")
    text = (f"{outcome['file']}: {outcome['decision'].upper()} after {outcome['looks']} look(s)"
            f"{'' if outcome['decided_at'] is None else ' at ' + outcome['decided_at']}; live "
            f"reward bounds [{'-' if low is None else f'{low:+.4f}'}, "
            f"{'-' if high is None else f'{high:+.4f}'}]")  # fmt: skip
    if "reproduced" in outcome:
        text += f"; recorded {outcome['recorded']}: " + (
            "reproduced" if outcome["reproduced"] else "NOT reproduced"
        )
    if outcome.get("reason"):
        text += f"\n  {outcome['reason']}"
    return text
