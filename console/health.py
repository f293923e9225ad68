"""The services' health from their Prometheus metrics: ingest (events accepted and rejected),
dead letters by reason (the collector's rejections and the stream worker's DLQ), and how far
the stream worker and the sink lag behind their topics. Pure: scrapes in, figures out.

A rate is taken between the newest scrape of a service and its oldest one inside the window;
a counter that went down (the service restarted) restarts the rate from its new value. Which
service a scrape came from is read from its metrics' names, so the URLs need no labels.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from console.readers import Scrape
from console.service_state import service_of, state_of

_KEY = re.compile(r"^(?P<name>[a-z_:]+)(?:\{(?P<labels>.*)\})?$")
# counters by reason: (source shown on the page, sample name, label holding the reason); the
# gateway's are answers served whose rollout could not be built (a token llama.cpp gave
# without its probability: missing_logprobs), never learned from or judged
DEAD_LETTERS = (
    ("collector", "rtrl_collector_rejections_total", "reason"),
    ("stream", "rtrl_stream_dlq_total", "reason"),
    ("gateway rollouts", "rtrl_gateway_rollouts_refused_total", "reason"),
)
INGEST: tuple[tuple[str, str, dict[str, str]], ...] = (
    ("accepted", "rtrl_collector_events_total", {"outcome": "accepted"}),
    ("rejected", "rtrl_collector_events_total", {"outcome": "rejected"}),
    ("stream input", "rtrl_stream_events_total", {}),
    ("reward records", "rtrl_stream_records_total", {}),
    ("landed in the warehouse", "rtrl_sink_landed_total", {}),
    ("completions served", "rtrl_gateway_requests_total", {}),
    ("gateway switched checkpoint", "rtrl_gateway_checkpoint_switches_total", {}),
)
LAGS = (("stream worker", "rtrl_stream_lag"), ("warehouse sink", "rtrl_sink_lag"))


def split_key(key: str) -> tuple[str, dict[str, str]]:
    """
    >>> split_key("rtrl_sink_lag{partition=0,topic=rewards}")
    ('rtrl_sink_lag', {'partition': '0', 'topic': 'rewards'})
    """
    match = _KEY.match(key)
    if match is None:
        return key, {}
    labels = match["labels"] or ""
    return match["name"], dict(p.split("=", 1) for p in labels.split(",") if "=" in p)


def _sum(samples: dict[str, float], name: str, where: dict[str, str]) -> float | None:
    """The sum of every sample of ``name`` whose labels include ``where``; None: none."""
    found = None
    for key, value in samples.items():
        n, labels = split_key(key)
        if n == name and all(labels.get(k) == v for k, v in where.items()):
            found = (found or 0.0) + value
    return found


def _by_label(samples: dict[str, float], name: str, label: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for key, value in samples.items():
        n, labels = split_key(key)
        if n == name and label in labels:
            out[labels[label]] = out.get(labels[label], 0.0) + value
    return out


def rate(now: Scrape, then: Scrape | None, value_now: float, value_then: float | None
         ) -> float | None:  # fmt: skip
    """Per second between two scrapes; a counter that went down restarted from zero.

    >>> a, b = Scrape("u", 0.0, {}), Scrape("u", 10.0, {})
    >>> rate(b, a, 30.0, 10.0), rate(b, a, 4.0, 10.0), rate(b, None, 4.0, None)
    (2.0, 0.4, None)
    """
    if then is None or now.at <= then.at:
        return None
    before = value_then or 0.0
    return (value_now - (before if value_now >= before else 0.0)) / (now.at - then.at)


def _window_start(history: Sequence[Scrape], window_s: float) -> Scrape | None:
    """The oldest good scrape within the window before the newest (None: only one)."""
    newest = history[-1]
    inside = [s for s in history[:-1] if s.error is None and newest.at - s.at <= window_s]
    return inside[0] if inside else None


def health(histories: Sequence[Sequence[Scrape]], window_s: float) -> dict[str, Any]:
    """Ingest counts and rates, dead letters by source and reason, lags, and each service's
    state, from every service's recent scrapes (oldest first).

    >>> key = "rtrl_gateway_rollouts_refused_total{reason=missing_logprobs}"
    >>> then, now = Scrape("g", 0.0, {key: 1.0}), Scrape("g", 10.0, {key: 3.0})
    >>> health([[then, now]], 60.0)["dead_letters"]
    [{'source': 'gateway rollouts', 'reason': 'missing_logprobs', 'total': 3.0, 'per_s': 0.2}]
    """
    ingest: list[dict[str, Any]] = []
    dead: list[dict[str, Any]] = []
    lags: list[dict[str, Any]] = []
    services = []
    for history in histories:
        if not history:
            continue
        now = history[-1]
        services.append(service_row(history))
        if now.error is not None:
            continue
        then = _window_start(history, window_s)
        for what, name, where in INGEST:
            total = _sum(now.samples, name, where)
            if total is not None:
                before = None if then is None else _sum(then.samples, name, where)
                ingest.append({"what": what, "total": total,
                               "per_s": rate(now, then, total, before)})  # fmt: skip
        for source, name, label in DEAD_LETTERS:
            before_by = {} if then is None else _by_label(then.samples, name, label)
            for reason, total in sorted(_by_label(now.samples, name, label).items()):
                dead.append({"source": source, "reason": reason, "total": total,
                             "per_s": rate(now, then, total, before_by.get(reason))})  # fmt: skip
        for what, name in LAGS:
            lag = _sum(now.samples, name, {})
            if lag is not None:
                lags.append({"what": what, "messages": lag})
    return {"services": services, "ingest": ingest, "dead_letters": dead, "lags": lags}


def service_row(history: Sequence[Scrape]) -> dict[str, Any]:
    """One service on the page: its name (from its newest good scrape: a dead service keeps
    the name it had alive), whether it answers, and what it is doing, or why it does not.

    >>> alive = Scrape("http://t/metrics", 0.0, {"rtrl_trainer_rounds_total{outcome=x}": 0.0})
    >>> dead = Scrape("http://t/metrics", 9.0, {}, "http://t/metrics: ConnectError: refused")
    >>> row = service_row([alive, dead])
    >>> row["service"], row["up"], row["state"]
    ('trainer', False, 'down: http://t/metrics: ConnectError: refused')
    """
    now = history[-1]
    good = [s for s in history if s.error is None]
    name = service_of(good[-1].samples) if good else None
    up = now.error is None
    state = state_of(name, now.samples) if up else f"down: {now.error}"
    return {"url": now.url, "service": name or now.url, "up": up, "state": state,
            "error": now.error}  # fmt: skip


def lag_point(at: float, lags: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One point of the lag chart: the time and each lag by what lags.

    >>> lag_point(5.0, [{"what": "stream worker", "messages": 3.0}])
    {'t': 5.0, 'stream worker': 3.0}
    """
    return {"t": at, **{lag["what"]: lag["messages"] for lag in lags}}
