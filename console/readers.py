"""What the live page reads, and only reads: the checkpoint registry's records, the warehouse's
DuckDB catalog (a read-only connection per refresh) and the services' Prometheus metrics.

Each reader answers what it found and says what it could not read (a missing catalog before the
first build, a service that is down) as a sentence, never an exception: a page of a loop that is
starting up shows what exists so far. The warehouse's catalog is replaced atomically by every
rebuild (``warehouse.catalog.build_catalog``), so a connection opened per refresh reads one
consistent snapshot and the next refresh sees the new one.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb
import httpx
from prometheus_client.parser import text_string_to_metric_families

from checkpoints.store import CheckpointRegistry
from warehouse.ab_mart import METRICS

# The seed's three headline metrics of an experiment (edits kept, dissatisfied follow-ups,
# latency), as the A/B mart names them.
SEED_METRICS = ("kept_share", "dissatisfied_rate", "latency_mean_ms")
# Buckets of the reward-over-time chart: the narrowest that gives at most MAX_BUCKETS over the
# data's span (a live run spans minutes, a deployment days).
BUCKET_SECONDS = (10, 60, 300, 900, 3600, 6 * 3600, 86400)
MAX_BUCKETS = 60


def read_registry(root: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """Every checkpoint's record as JSON, oldest first, and what could not be read."""
    try:
        infos = CheckpointRegistry(root).list()
    except (OSError, ValueError, KeyError) as exc:
        return [], [f"registry {root}: {exc}"]
    return [{**info.to_json_dict(), "decision": info.decision()} for info in infos], []


@dataclass
class WarehouseFacts:
    """What the catalog holds for the page; every list empty before the first build."""

    built_at: float | None = None  # the catalog file's mtime (seconds since the epoch)
    rewards: list[dict[str, Any]] = field(default_factory=list)  # per (checkpoint, bucket)
    bucket_s: int | None = None
    arms: list[dict[str, Any]] = field(default_factory=list)  # of the running experiment
    experiment: str | None = None
    seed_metrics: list[dict[str, Any]] = field(default_factory=list)
    monitors: list[dict[str, Any]] = field(default_factory=list)
    dlq: list[dict[str, Any]] = field(default_factory=list)  # landed, by reason and stage
    problems: list[str] = field(default_factory=list)


def _rows(con: duckdb.DuckDBPyConnection, sql: str, params: list[Any] | None = None
          ) -> list[dict[str, Any]]:  # fmt: skip
    cursor = con.execute(sql, params or [])
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def bucket_for(span_s: float) -> int:
    """The narrowest bucket that shows ``span_s`` in at most MAX_BUCKETS points.

    >>> bucket_for(120), bucket_for(3 * 3600), bucket_for(90 * 86400)
    (10, 300, 86400)
    """
    for width in BUCKET_SECONDS:
        if span_s / width <= MAX_BUCKETS:
            return width
    return BUCKET_SECONDS[-1]


class Catalog:
    """A read-only connection to the catalog, kept open until a rebuild replaces the file.

    A rebuild renames a new file over the old one, so the open connection goes on reading the
    snapshot it opened; a new inode (or mtime) means a new catalog and a new connection. One
    connection per catalog rather than one per refresh: DuckDB's read-only opens and closes of
    one file, several a second from a worker thread, are what a page must never wait on.
    """

    def __init__(self, db: Path) -> None:
        self.db = db
        self._con: duckdb.DuckDBPyConnection | None = None
        self._identity: tuple[int, int] | None = None

    def connection(self) -> duckdb.DuckDBPyConnection | None:
        """The open connection to the current file; None when there is no catalog yet."""
        try:
            stat = os.stat(self.db)
        except FileNotFoundError:
            self.close()
            return None
        identity = (stat.st_ino, stat.st_mtime_ns)
        if self._con is None or identity != self._identity:
            self.close()
            self._con = duckdb.connect(str(self.db), read_only=True)
            self._con.execute("SET enable_progress_bar = false")
            self._identity = identity
        return self._con

    def close(self) -> None:
        if self._con is not None:
            self._con.close()
        self._con, self._identity = None, None


def read_warehouse(catalog: Catalog, experiment: str | None) -> WarehouseFacts:
    """The catalog's figures for the page. ``experiment``: the running one (a live canary's);
    None takes the experiment with the latest interaction."""
    facts = WarehouseFacts()
    try:
        con = catalog.connection()
    except duckdb.Error as exc:
        facts.problems.append(f"warehouse catalog {catalog.db}: {exc}")
        return facts
    if con is None:
        facts.problems.append(f"no warehouse catalog at {catalog.db} yet (rtrl warehouse catalog)")
        return facts
    facts.built_at = os.path.getmtime(catalog.db)
    for name, read in (("rewards", _rewards), ("experiment", _experiment),
                       ("monitors", _monitors), ("dead letters", _dlq)):  # fmt: skip
        try:
            read(con, facts, experiment)
        except duckdb.Error as exc:
            facts.problems.append(f"warehouse {name}: {str(exc).splitlines()[0]}")
    return facts


def _rewards(con: duckdb.DuckDBPyConnection, facts: WarehouseFacts, _: str | None) -> None:
    """Mean reward of scored interactions per checkpoint and time bucket (of ``t_open``), with
    the pieces of a normal 95 % interval (n, standard deviation)."""
    span = con.execute(
        "SELECT epoch(min(t_open)), epoch(max(t_open)) FROM rewards WHERE status = 'scored'"
    ).fetchone()
    if span is None or span[0] is None:
        return
    width = bucket_for(float(span[1] - span[0]))
    facts.bucket_s = width
    facts.rewards = _rows(con, f"""
        SELECT checkpoint_id,
               CAST(floor(epoch(t_open) / {width}) * {width} AS BIGINT) AS bucket,
               count(*) AS n, avg(reward) AS mean, stddev_samp(reward) AS sd
        FROM rewards WHERE status = 'scored' AND checkpoint_id IS NOT NULL
        GROUP BY ALL ORDER BY bucket, checkpoint_id""")  # fmt: skip


def _experiment(con: duckdb.DuckDBPyConnection, facts: WarehouseFacts,
                experiment: str | None) -> None:  # fmt: skip
    if experiment is None:
        latest = con.execute(
            "SELECT experiment_name FROM rewards WHERE experiment_name IS NOT NULL "
            "ORDER BY t_open DESC LIMIT 1"
        ).fetchone()
        experiment = latest[0] if latest else None
    facts.experiment = experiment
    if experiment is None:
        return
    facts.arms = _rows(con, """
        SELECT experiment_arm AS arm, count(DISTINCT user_id) AS users, count(*) AS interactions
        FROM rewards WHERE experiment_name = ? GROUP BY ALL ORDER BY arm""",
        [experiment])  # fmt: skip
    facts.seed_metrics = _rows(con, f"""
        SELECT arm, control_arm, metric, control, value, relative_change, ci_low, ci_high,
               seq_ci_low, seq_ci_high, p_value, n_users
        FROM ab_report
        WHERE experiment = ? AND metric IN ({", ".join("?" for _ in SEED_METRICS)})
        ORDER BY control_arm, arm, metric_order""", [experiment, *SEED_METRICS])  # fmt: skip
    for row in facts.seed_metrics:
        row["label"] = METRICS[row["metric"]][0]


def _monitors(con: duckdb.DuckDBPyConnection, facts: WarehouseFacts, _: str | None) -> None:
    facts.monitors = _rows(con, "SELECT * FROM monitor_rates ORDER BY checkpoint_id")


def _dlq(con: duckdb.DuckDBPyConnection, facts: WarehouseFacts, _: str | None) -> None:
    facts.dlq = _rows(con, """
        SELECT reason, stage, sum(n_records) AS n FROM dlq_reasons
        GROUP BY ALL ORDER BY n DESC, reason""")  # fmt: skip


@dataclass(frozen=True)
class Scrape:
    """One service's metrics at one time: ``name{label=value,...}`` -> value."""

    url: str
    at: float
    samples: dict[str, float]
    error: str | None = None


def sample_key(name: str, labels: dict[str, str]) -> str:
    """
    >>> sample_key("rtrl_stream_dlq_total", {"reason": "bad_json"})
    'rtrl_stream_dlq_total{reason=bad_json}'
    """
    inner = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
    return f"{name}{{{inner}}}" if inner else name


def parse_metrics(text: str) -> dict[str, float]:
    """Prometheus text as samples by key; counters' ``_created`` timestamps left out."""
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if not sample.name.endswith("_created"):
                out[sample_key(sample.name, sample.labels)] = float(sample.value)
    return out


def scrape(client: httpx.Client, url: str, now: float) -> Scrape:
    try:
        answer = client.get(url)
        answer.raise_for_status()
        return Scrape(url, now, parse_metrics(answer.text))
    except (httpx.HTTPError, ValueError) as exc:
        return Scrape(url, now, {}, f"{url}: {type(exc).__name__}: {exc}")


def timestamp(value: Any) -> Any:
    """A value the page can take as JSON (datetimes as ISO text)."""
    return value.isoformat() if isinstance(value, datetime) else value
