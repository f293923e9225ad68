"""`rtrl canary decide`: look at every live canary's A/B and roll it out or back (and `rtrl
canary evaluate`, ``release.canary_cli``)."""

from __future__ import annotations

import argparse
import logging

from infra.settings_cli import add_command, add_group
from release import canary_cli, gate_cli
from release.cli_options import CANARY_DECIDE_OPTIONS, CanaryDecideOptions

log = logging.getLogger("rtrl.canary")


def register(sub: argparse._SubParsersAction) -> None:
    csub = add_group(
        sub,
        "canary",
        help="judge live canaries on their A/B: roll out, roll back, or wait",
        description="A candidate that passed the gate with `rtrl train --canary PERCENT` "
        "serves that share of users as experiment canary-ID (arms parent and canary). A look "
        "reads the experiment's reward records from the warehouse catalog, and is taken only "
        "when new data has landed since the last one. Every bound is anytime-valid (a "
        "confidence sequence over users), so looking often keeps the error rates: a sample "
        "ratio mismatch (p < 0.001) or a guardrail significantly worse (invalid tool calls, "
        "clarifying questions, censored share, edit rate) rolls it back at once; once each arm "
        "has enough users with scored interactions, it is rolled out when its live reward is "
        "shown no worse than the parent's by more than the margin, and rolled back when shown "
        "worse by more than it. Undecided at its deadline, it is rolled back. Every look is "
        "recorded on the checkpoint.",
    )
    add_command(
        csub,
        "decide",
        _decide,
        CANARY_DECIDE_OPTIONS,
        help="one look at every live canary (or --candidate)",
    )
    canary_cli.register(csub)
    gate_cli.register(sub)


def _decide(args: argparse.Namespace) -> int:
    import threading

    from infra.lifetime import stop_signals_call
    from infra.periodic import run_every

    options = CANARY_DECIDE_OPTIONS.read(args)
    if options.watch:
        import duckdb

        from infra.watch_metrics import WatchMetrics

        metrics = WatchMetrics("canary")
        server = metrics.serve(options.metrics_port) if options.metrics_port is not None else None
        judged: dict[str, float] = {}

        def step() -> bool:
            judged["canaries_judged"] = max(_look_all(options), 0)
            return False  # polled again after the interval; no new data, no look

        def on_pass(outcome: str, seconds: float) -> None:
            worked = outcome == "idle" and judged.get("canaries_judged", 0) > 0
            metrics.passed("worked" if worked else outcome, seconds, judged)

        stop = threading.Event()
        try:
            with stop_signals_call(lambda _signum, _frame: stop.set()):
                run_every(step, options.interval_s, stop, (OSError, RuntimeError, duckdb.Error),
                          log, on_pass)  # fmt: skip
        finally:
            if server is not None:
                server.shutdown()
        return 0
    return 0 if _look_all(options) >= 0 else 2


def _look_all(options: CanaryDecideOptions) -> int:
    """Look at every live canary; the number judged, -1 when the request was wrong."""
    import orjson

    from checkpoints.store import CheckpointRegistry
    from release.canary_io import live_canaries, look
    from rewards.monitors import MonitorThresholds, load_thresholds

    registry = CheckpointRegistry(options.registry)
    names = (
        [options.candidate]
        if options.candidate
        else [i.checkpoint_id for i in live_canaries(registry)]
    )
    thresholds = load_thresholds(options.thresholds) if options.thresholds else MonitorThresholds()
    verdicts = []
    for name in names:
        try:
            verdict = look(registry, options.catalog, name, thresholds)
        except (KeyError, ValueError) as exc:
            log.error("%s", exc.args[0] if exc.args else exc)
            return -1
        verdicts.append({"checkpoint_id": name, **verdict.to_json()})
        if not options.json and (verdict.new_data or not options.watch):
            print(_render(name, verdict), end="")
    if options.json:
        print(orjson.dumps(verdicts, option=orjson.OPT_INDENT_2).decode())
    elif not names:
        print(f"no live canary in {options.registry}")
    if options.publish:
        from checkpoints.publish import announce_missing
        from infra.topics import TopicNames

        announce_missing(options.bootstrap, TopicNames(options.topic_prefix).checkpoints, registry)
    return len(verdicts)


def _render(name: str, verdict) -> str:  # noqa: ANN001  (a CanaryVerdict)
    srm = verdict.srm
    head = verdict.verdict.upper() if verdict.new_data else "NO NEW DATA"
    lines = [
        f"{name}: {head} at look {verdict.look}; users parent/canary "
        f"{srm.observed[0]}/{srm.observed[1]} (SRM chi-square {srm.chi2:.2f}, "
        f"anytime-valid p {srm.p_value:.3g})",
        f"  {'metric':<24} {'parent':>9} {'canary':>9} {'diff':>9}  {'anytime bounds':<22} "
        f"{'p':>9}  null",
    ]
    for c in verdict.comparisons:
        if not c.informative or c.difference is None:
            lines.append(f"  {c.metric:<24} {_num(c.parent):>9} {_num(c.canary):>9} "
                         f"{'-':>9}  uninformative: {c.why}")  # fmt: skip
            continue
        bounds = f"[{_signed(c.low)}, {_signed(c.high)}]"
        lines.append(
            f"  {c.metric:<24} {c.parent:>9.4f} {c.canary:>9.4f} {c.difference:>+9.4f}  "
            f"{bounds:<22} {c.p_value:>9.3g}  {c.null} (alpha {c.alpha:.3g})"
            f"{'  ALARM' if c.alarm else ''}"
        )
    lines += [f"  {reason}" for reason in verdict.reasons]
    return "\n".join(lines) + "\n"


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:.4f}"


def _signed(v: float | None) -> str:
    return "open" if v is None else f"{v:+.4f}"
