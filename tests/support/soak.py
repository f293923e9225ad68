"""The soak of the production topology: `rtrl up` (every service a process of its own under
supervisord), steady simulated traffic through the real gateway and collector, and faults while
it flows (the trainer killed, the broker stopped, the stream worker frozen or the machine
starved by a CPU hog); then the
invariants, read back from what the services wrote. The suite runs it short
(``tests/rtrl/test_soak.py``); ``bench/soak.py`` runs it long with SmolLM2 and reports.

Invariants (``Soak.invariants``): every event the collector accepted is archived, and counted in
exactly one interaction's reward record (or, arriving after its window closed, in the late
archive); every interaction that was answered has one reward record; no checkpoint is
registered twice for the same parent and batches (a killed round resumed, never trained
again); every request the users made was answered.
"""

from __future__ import annotations

import json
import multiprocessing
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import httpx

from infra.ports import free_port_block
from ingest.sdk import Client, SdkConfig
from rtrl.simulate import SimulateSettings, simulate_steady
from rtrl.worlds.code_world import Outcome
from rtrl.worlds.steady_traffic import Traffic
from tests.support.cpu_ledger import CpuLedger
from tests.support.process_tree import kill_children_named

# The tiny model's recipe: a LoRA round of one epoch, no candidate evals (its answers are noise).
TINY_TRAIN_ARGS = ("--lora-r 8 --lora-alpha 16 --lr 0.0004 --epochs 1 --minibatches 2 "
                   "--micro-batch 8 --device cpu --eval-prompts 0")  # fmt: skip


# the users' timeout; the gateway's answer deadline is a minute under it, so that a request it
# cannot answer in time is refused with its reason before the user gives up on it
CLIENT_TIMEOUT_S = 300


@dataclass(frozen=True)
class SoakPlan:
    model: str = "tiny"
    engine: str = "transformers"
    traffic_s: float = 90.0
    rate_per_min: float = 40.0
    users: int = 12
    threads: int = 4  # the users' asks in flight at once: past them an arrival is shed
    max_tokens: int = 16
    train_args: str = TINY_TRAIN_ARGS
    # (seconds into the traffic, the fault, how long it lasts)
    # the suite's: a frozen stream worker (SIGSTOP) stands for starvation, since a CPU hog would
    # starve the other worker's tests too; the broker's stop is the long form's (bench/soak.py)
    faults: tuple[tuple[float, str, float], ...] = (
        (15.0, "kill the trainer", 0.0),
        (35.0, "kill the sink", 0.0),
        (55.0, "freeze the stream worker", 15.0),
    )
    window_s: int = 40  # the reward window: longer than the broker's outage
    late_s: int = 20
    check_every_s: float = 5.0
    # the evidence a round waits for (``trainer.trigger``): the suite's few runs; a real
    # model needs a round of the code world's size before a candidate can pass the gate
    min_rows: int = 8
    gate_min_examples: int = 8
    gate_min_users: int = 3


@dataclass
class FaultRecord:
    what: str
    at_s: float
    lasted_s: float
    answered: int  # interactions answered while it lasted (and until the next fault began)
    failed: int
    refused: int = 0  # refused with a reason (the gateway's code: overloaded)


@dataclass
class Soak:
    root: Path
    plan: SoakPlan = SoakPlan()
    faults: list[FaultRecord] = field(default_factory=list)
    traffic: Traffic[Outcome] = field(default_factory=Traffic)
    sdk_counts: dict[str, int] = field(default_factory=dict)
    served_since: dict[str, float] = field(default_factory=dict)  # checkpoint -> first seen, s
    cpu_s: dict[str, float] = field(default_factory=dict)  # service -> CPU seconds
    # set (bench/soak.py: on Ctrl-C): the traffic ends early and no further fault begins
    stopping: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        base = free_port_block(14, highest=65000)  # `rtrl up`'s metrics ports stay under it
        self.ports = {"kafka": base, "collector": base + 3, "gateway": base + 4,
                      "console": base + 5, "metrics": base + 6}  # fmt: skip
        self.data = self.root / "up"
        self.config = self.root / "rtrl.toml"
        self._up: subprocess.Popen[str] | None = None
        self._t0 = time.monotonic()

    # --- the topology -------------------------------------------------------------------
    def start(self, timeout_s: float = 300) -> None:
        p = self.plan
        self.config.write_text(f"""[kafka]
bootstrap = "127.0.0.1:{self.ports["kafka"]}"

[paths]
warehouse = "{self.data / "warehouse"}"
catalog = "{self.data / "warehouse" / "warehouse.duckdb"}"
registry = "{self.data / "checkpoints"}"
key_db = "{self.data / "keys.sqlite"}"

[reward]
window_s = {p.window_s}
late_s = {p.late_s}
grace_s = 2

[batches]
min_rows = {p.min_rows}

[trainer]
gate_min_examples = {p.gate_min_examples}
gate_min_users = {p.gate_min_users}

[serving]
answer_deadline_s = {CLIENT_TIMEOUT_S - 60}
""")
        argv = [sys.executable, "-m", "rtrl.cli", "--config", str(self.config), "up",
                "--data-dir", str(self.data), "--model", p.model, "--engine", p.engine,
                "--kafka-port", str(self.ports["kafka"]),
                "--collector-port", str(self.ports["collector"]),
                "--gateway-port", str(self.ports["gateway"]),
                "--console-port", str(self.ports["console"]),
                "--metrics-port", str(self.ports["metrics"]),
                "--check-every-s", str(p.check_every_s),
                f"--train-args={p.train_args}"]  # fmt: skip
        self.out = self.root / "up.out"
        with self.out.open("w") as sink:
            # a session of its own: a Ctrl-C at the terminal stops the traffic first
            # (bench/soak.py), and the topology is then stopped in order (stop)
            self._up = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT, text=True,
                                        start_new_session=True)  # fmt: skip
        self._wait("every service", lambda: "running: broker" in self.out.read_text(), timeout_s)
        self._wait("the gateway", lambda: _answers(f"{self.gateway}/readyz"), 120)
        self.key = (self.data / "api-key").read_text().strip()

    @property
    def gateway(self) -> str:
        return f"http://127.0.0.1:{self.ports['gateway']}"

    @property
    def collector(self) -> str:
        return f"http://127.0.0.1:{self.ports['collector']}"

    def stop(self) -> int:
        """SIGTERM to `rtrl up`: every service, then the broker; its exit code."""
        assert self._up is not None
        if self._up.poll() is None:
            self._up.send_signal(signal.SIGTERM)
            try:
                return self._up.wait(150)
            except subprocess.TimeoutExpired:
                self._up.kill()
                self.ctl("shutdown")
                return -9
        return self._up.returncode

    def ctl(self, *command: str) -> str:
        done = subprocess.run([sys.executable, "-m", "supervisor.supervisorctl", "-c",
                               str(self.data / "supervisord.conf"), *command],
                              capture_output=True, text=True, timeout=120)  # fmt: skip
        return done.stdout

    def status(self) -> dict[str, tuple[str, int]]:
        out = {}
        for line in self.ctl("status").splitlines():
            name, state, *rest = line.split()
            pid = int(rest[1].rstrip(",")) if state == "RUNNING" else 0
            out[name.split(":")[-1]] = (state, pid)
        return out

    # --- what is served, and what each service costs ---------------------------------------
    def watch(self, stop: threading.Event, every_s: float = 5.0) -> None:
        """Until ``stop``: when each checkpoint first serves (seconds from the traffic's start,
        asked in privacy mode: no rollout), and each service's CPU seconds (each of its
        processes' and their children's, summed over restarts)."""
        from rtrl.worlds.http_users import serving

        headers = {"Authorization": f"Bearer {self.key}"}
        ledger = CpuLedger()
        with httpx.Client(base_url=self.gateway, headers=headers, timeout=60) as http:
            while not stop.wait(every_s):
                try:
                    served = serving(http)
                    self.served_since.setdefault(served, round(time.monotonic() - self._t0, 1))
                except (httpx.HTTPError, KeyError):
                    pass
                for name, (_, pid) in self.status().items():
                    ledger.sample(name, pid)
        for name, seconds in ledger.totals().items():
            self.cpu_s[name] = self.cpu_s.get(name, 0.0) + seconds

    # --- traffic and faults ---------------------------------------------------------------
    def run_traffic(self) -> None:
        """Steady traffic for the plan's time, the faults at their times; the SDK flushed."""
        p = self.plan
        settings = SimulateSettings(gateway=self.gateway, collector=self.collector, org="default",
                                    users=p.users, max_tokens=p.max_tokens,
                                    rate_per_min=p.rate_per_min, duration_s=p.traffic_s,
                                    threads=p.threads)  # fmt: skip
        sdk_config = SdkConfig(endpoint=self.collector, api_key=self.key, org_id="default",
                               spool_path=self.root / "sdk-spool.db")  # fmt: skip
        headers = {"Authorization": f"Bearer {self.key}"}
        with httpx.Client(base_url=self.gateway, headers=headers,
                          timeout=CLIENT_TIMEOUT_S) as http, \
                Client(sdk_config) as sdk:  # fmt: skip
            users = threading.Thread(target=simulate_steady, args=(http, sdk, settings,
                                     self.stopping.is_set, self.traffic), daemon=True)  # fmt: skip
            started = self._t0 = time.monotonic()
            watching = threading.Event()
            watcher = threading.Thread(target=self.watch, args=(watching,), daemon=True)
            users.start()
            watcher.start()
            for at, what, lasts in p.faults:
                if self.stopping.wait(max(0.0, started + at - time.monotonic())):
                    break
                answered, failed, refused = self._counts()
                begun = round(time.monotonic() - started, 1)
                lasted = self._fault(what, lasts)
                self.faults.append(FaultRecord(what, begun, lasted, answered, failed, refused))
            users.join()
            watching.set()
            watcher.join(60)
            left = sdk.flush(timeout=180)
            self.sdk_counts = {**vars(sdk.counters()), "left": left}
        for record, after in zip(self.faults, [*self.faults[1:], None], strict=False):
            end = (after.answered, after.failed, after.refused) if after else self._counts()
            record.answered, record.failed, record.refused = (
                end[0] - record.answered,
                end[1] - record.failed,
                end[2] - record.refused,
            )

    def _counts(self) -> tuple[int, int, int]:
        """Interactions answered, failed and refused so far."""
        t = self.traffic
        return len(t.outcomes), sum(t.failed.values()), sum(t.refused.values())

    def _kill_and_wait(self, program: str) -> None:
        """SIGKILL ``program`` and wait until supervisord has it running again, a new pid."""
        pid = self.status()[program][1]
        assert pid, self.status()
        signal_pid(pid, signal.SIGKILL)
        self._wait(f"the {program}'s restart",
                   lambda: self.status()[program][0] == "RUNNING"
                   and self.status()[program][1] != pid, 60)  # fmt: skip

    def _fault(self, what: str, lasts: float) -> float:
        """Bring ``what`` about; how long it lasted: ``lasts``, or for a killed llama-server
        the seconds until the gateway had started it again."""
        if what in ("kill the trainer", "kill the sink"):
            self._kill_and_wait(what.rsplit(" ", 1)[1])
        elif what == "kill the gateway's llama-server":
            return kill_children_named(self.status()["gateway"][1], "llama-server")[1]
        elif what == "stop the broker":
            self.ctl("stop", "broker")
            time.sleep(lasts)
            self.ctl("start", "broker")
        elif what == "freeze the stream worker":
            pid = self.status()["stream"][1]
            assert pid, self.status()
            signal_pid(pid, signal.SIGSTOP)
            time.sleep(lasts)
            signal_pid(pid, signal.SIGCONT)
        elif what == "starve the machine":
            hogs = [multiprocessing.get_context("spawn").Process(target=_spin, args=(lasts,))
                    for _ in range(max(2, (multiprocessing.cpu_count())))]  # fmt: skip
            for hog in hogs:
                hog.start()
            for hog in hogs:
                hog.join(lasts + 30)
        else:
            raise ValueError(what)
        return lasts

    # --- what the services wrote -----------------------------------------------------------
    def wait_for_records(self, timeout_s: float = 240) -> float | None:
        """Seconds until every answered interaction had a reward record in the warehouse (the
        topology's liveness), None when not within ``timeout_s``: the invariants are read after
        the stop either way, once every service has flushed what it held."""
        want = {o.answer.interaction_id for o in self.traffic.outcomes}
        started = time.monotonic()
        try:
            self._wait("every interaction's reward record",
                       lambda: want <= set(self._query("SELECT interaction_id FROM stg_rewards",
                                                       column=True)), timeout_s)  # fmt: skip
        except TimeoutError:
            return None
        return round(time.monotonic() - started, 1)

    def invariants(self) -> dict[str, Any]:
        """The figures, and ``broken``: each invariant that does not hold, said."""
        archived = self._query("SELECT count(*), count(DISTINCT event_id) FROM stg_events")[0]
        in_records = self._query("SELECT e, count(*) FROM (SELECT unnest(event_ids) AS e "
                                 "FROM rewards) GROUP BY e")  # fmt: skip
        late = set(self._query("SELECT event_id FROM stg_late", column=True))
        counted = {e for e, _ in in_records}
        answered = {o.answer.interaction_id for o in self.traffic.outcomes}
        recorded = self._query("SELECT interaction_id, count(*) FROM rewards GROUP BY 1")
        events = set(self._query("SELECT event_id FROM stg_events", column=True))
        lineage = self._query("SELECT parent_id, batches, count(*) FROM checkpoints_trained "
                              "GROUP BY ALL HAVING count(*) > 1")  # fmt: skip
        broken = []
        if archived[1] != self.sdk_counts.get("sent"):
            broken.append(f"{archived[1]} distinct events archived, the collector accepted "
                          f"{self.sdk_counts.get('sent')}")  # fmt: skip
        if twice := [e for e, n in in_records if n > 1]:
            broken.append(f"{len(twice)} events counted in two records")
        if missing := events - counted - late:
            broken.append(f"{len(missing)} archived events in no record and not late")
        if unrecorded := answered - {i for i, _ in recorded}:
            broken.append(f"{len(unrecorded)} answered interactions without a record")
        if sum(self.traffic.failed.values()):
            broken.append(f"requests failed: {dict(self.traffic.failed)}")
        if lineage:
            broken.append(f"trained twice on the same batches: {lineage}")
        return {
            "events_accepted": self.sdk_counts.get("sent"),
            "events_archived_copies": archived[0],
            "events_archived": archived[1],
            "events_late": len(late),
            "interactions_answered": len(answered),
            "interactions_recorded": len(recorded),
            "requests_failed": dict(self.traffic.failed),
            "requests_refused": dict(self.traffic.refused),
            "arrivals_shed": self.traffic.shed,
            "faults": [vars(f) for f in self.faults],
            "checkpoints": self.checkpoints(),
            "served_since_s": self.served_since,
            "cpu_s": {k: round(v, 1) for k, v in sorted(self.cpu_s.items())},
            "broken": broken,
        }

    def checkpoints(self) -> list[dict[str, Any]]:
        from checkpoints.store import CheckpointRegistry

        return [{"id": c.checkpoint_id, "parent": c.parent, "status": c.status,
                 "batches": list(c.batches)}
                for c in CheckpointRegistry(self.data / "checkpoints").list()]  # fmt: skip

    def _query(self, sql: str, column: bool = False, tries: int = 5) -> list[Any]:
        """``sql`` on a catalog of the warehouse as it is now; asked again when the sink's
        compaction removed a file between the catalog's listing and the read (it merges small
        files while the services run: ``warehouse.compact``)."""
        from warehouse.catalog import build_catalog
        from warehouse.store import Store

        for attempt in range(tries):
            try:
                db = build_catalog(Store(str(self.data / "warehouse")),
                                   str(self.root / "soak.duckdb"))  # fmt: skip
                with duckdb.connect(db, read_only=True) as con:
                    con.execute("CREATE TEMP TABLE checkpoints_trained AS SELECT * FROM "
                                f"read_json_auto('{self._trained_json()}')")  # fmt: skip
                    rows = con.execute(sql).fetchall()
                return [r[0] for r in rows] if column else rows
            except duckdb.IOException:
                if attempt == tries - 1:
                    raise
                time.sleep(0.5)
        raise AssertionError("unreachable")

    def _trained_json(self) -> Path:
        """Each trained checkpoint's parent and batches, for the lineage query."""
        path = self.root / "trained.json"
        rows = [{"parent_id": c["parent"], "batches": ",".join(sorted(c["batches"]))}
                for c in self.checkpoints() if c["parent"]]  # fmt: skip
        path.write_text(json.dumps(rows or [{"parent_id": "", "batches": ""}]))
        return path

    def _wait(self, what: str, ready: Any, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not ready():
            if self._up is not None and self._up.poll() is not None:
                raise RuntimeError(f"rtrl up exited while waiting for {what}: "
                                   f"{self.out.read_text()[-2000:]}")  # fmt: skip
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what} not within {timeout:.0f} s")
            time.sleep(1)


def signal_pid(pid: int, signum: int) -> None:
    import os

    os.kill(pid, signum)


def _spin(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False
