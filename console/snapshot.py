"""One snapshot of the page: every source read once and turned into the page's view model.

:class:`Snapshots` keeps what needs memory across refreshes (each service's recent scrapes, for
rates; the lag's recent course, for its chart) and numbers each snapshot whose content changed,
so the server sends a page only what is new. The reading is in ``console.readers``, the
figures in ``console.views``, ``console.health`` and ``console.rewards_view``.
"""

from __future__ import annotations

import hashlib
import time
from collections import deque
from dataclasses import asdict
from typing import Any

import httpx
import orjson

from console import health, rewards_view, views
from console.readers import (
    Catalog,
    Scrape,
    WarehouseFacts,
    read_registry,
    read_warehouse,
    scrape,
)
from console.settings import ConsoleSettings

LAG_POINTS = 300  # the lag chart's memory, in refreshes


class Snapshots:
    """The page's sources, read on each :meth:`refresh` (one thread at a time)."""

    def __init__(self, settings: ConsoleSettings) -> None:
        self.settings = settings
        self._catalog = Catalog(settings.catalog())
        self._client = httpx.Client(timeout=max(0.5, min(3.0, settings.refresh_s * 2)))
        keep = int(settings.rate_window_s / settings.refresh_s) + 2
        self._scrapes: dict[str, deque[Scrape]] = {u: deque(maxlen=keep) for u in settings.metrics}
        self._lags: deque[dict[str, Any]] = deque(maxlen=LAG_POINTS)
        self._digest = ""
        self.version = 0
        self.latest: dict[str, Any] = {}

    def close(self) -> None:
        self._client.close()
        self._catalog.close()

    def refresh(self) -> bool:
        """Read every source; True when the page's content changed (a new version)."""
        now = time.time()
        for url, history in self._scrapes.items():
            history.append(scrape(self._client, url, now))
        records, problems = read_registry(self.settings.registry_dir())
        now_serving = views.serving(records)
        facts = read_warehouse(self._catalog, now_serving["experiment"])
        ops = health.health([list(h) for h in self._scrapes.values()],
                            self.settings.rate_window_s)  # fmt: skip
        if ops["lags"]:
            self._lags.append(health.lag_point(now, ops["lags"]))
        content = build(records, now_serving, facts, ops, list(self._lags),
                        [*problems, *facts.problems])  # fmt: skip
        digest = hashlib.sha256(as_json(content)).hexdigest()
        changed = digest != self._digest
        if changed:
            self._digest = digest
            self.version += 1
        self.latest = {**content, "version": self.version, "read_at": now}
        return changed


def build(records: list[dict[str, Any]], now_serving: dict[str, Any], facts: WarehouseFacts,
          ops: dict[str, Any], lags: list[dict[str, Any]],
          problems: list[str]) -> dict[str, Any]:  # fmt: skip
    """The page's view model from what was read: pure."""
    return {
        "serving": {
            **now_serving,
            "observed_arms": rewards_view.arm_shares(facts.arms),
            "observed_experiment": facts.experiment,
        },  # fmt: skip
        "candidates": views.candidates(records),
        "canaries": views.canaries(records),
        "rewards": {
            "bucket_s": facts.bucket_s,
            "series": rewards_view.reward_series(facts.rewards),
        },  # fmt: skip
        "experiment": {
            "name": facts.experiment,
            "seed_metrics": rewards_view.seed_metrics(facts.seed_metrics),
        },  # fmt: skip
        "mismatch": views.mismatch(records),
        "monitors": {"rates": facts.monitors, "alarms": views.monitor_alarms(records)},
        "health": {**ops, "lag_history": lags, "dlq_landed": facts.dlq},
        "warehouse_built_at": facts.built_at,
        "problems": problems,
    }


def as_json(snapshot: dict[str, Any]) -> bytes:
    """The snapshot as the page receives it (non-JSON values such as dates as text)."""
    return orjson.dumps(snapshot, default=_fallback, option=orjson.OPT_NON_STR_KEYS)


def _fallback(value: Any) -> Any:
    if hasattr(value, "__dataclass_fields__"):
        return asdict(value)
    return str(value)
