"""Benchmark of `rtrl otel export`: rewards per second delivered to a local OTLP logs receiver,
beside the rate the stream worker turns the same interactions' events into rewards.

    .venv/bin/python bench/otel_export_bench.py [--interactions 10000] [--bootstrap HOST:PORT]

1. A workload of N interactions (``rewards.workload``): its events go to ``telemetry.events``,
   its N reward records (``compute_record``) to ``rewards``.
2. The exporter (``otel.exporter.Exporter``, OTLP logs, batches of ``--max-batch``) reads
   ``rewards`` from offset 0 and delivers every record to a real OTLP/HTTP receiver in this
   process (a threaded ``http.server`` that decodes each protobuf request and counts its log
   records); the rate is records over the time from the first delivered request to the last,
   with every batch committed (group join and the idle end are not counted).
3. The peer, in the same run: one stream worker (``python -m streams``, as in
   ``bench/stream_join.py``) joins the same events; its events/s times N / events is the rate
   at which it writes rewards.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, kafka, reexec_in_venv, write_results  # noqa: E402

reexec_in_venv(__file__)


class Receiver:
    def __init__(self) -> None:
        self.records = 0
        self.first: float | None = None
        self.last = 0.0
        self.lock = threading.Lock()


def serve_receiver(receiver: Receiver) -> tuple[ThreadingHTTPServer, str]:
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            body = self.rfile.read(int(self.headers["content-length"]))
            request = ExportLogsServiceRequest.FromString(body)
            n = sum(len(sl.log_records) for rl in request.resource_logs for sl in rl.scope_logs)
            now = time.perf_counter()
            with receiver.lock:
                receiver.first = receiver.first or now
                receiver.records += n
                receiver.last = now
            self.send_response(200)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def export_rate(bootstrap: str, names: Any, total: int, max_batch: int) -> tuple[float, float]:
    """(evaluations/s delivered, CPU µs per record read, this process's)."""
    from otel.exporter import Exporter
    from otel.settings import ExportSettings

    receiver = Receiver()
    server, url = serve_receiver(receiver)
    settings = ExportSettings(bootstrap=bootstrap, topics=names, endpoint=url,
                              group_id=f"bench-otel-{uuid.uuid4().hex[:6]}", once=True,
                              once_idle_s=2.0, max_batch=max_batch)  # fmt: skip
    cpu = time.process_time()
    stats = Exporter(settings).run()
    cpu_s = time.process_time() - cpu
    server.shutdown()
    # privacy-mode records are read and passed, never delivered
    assert stats.read == total and stats.delivered == receiver.records, (stats, receiver.records)
    assert receiver.first is not None
    return receiver.records / max(receiver.last - receiver.first, 1e-9), cpu_s / total * 1e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"))
    ap.add_argument("--interactions", type=int, default=10000)
    ap.add_argument("--max-batch", type=int, default=512)
    ap.add_argument("--work", type=Path, default=REPO / "bench" / "out" / "otel_export")
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)

    import orjson
    from confluent_kafka import Producer
    from stream_join import join_rate, produce, worker

    from infra.settings import reliable_producer
    from infra.topics import TopicNames
    from infra.topics_apply import apply_topics
    from rewards.config import RewardConfig
    from rewards.function import compute_record
    from rewards.tenant_keys import rewards_key
    from rewards.workload import generate_workload

    with kafka(args.bootstrap) as bootstrap:
        names = TopicNames(f"bench{uuid.uuid4().hex[:8]}.")
        apply_topics(bootstrap, names, replication=1)
        events = generate_workload(args.interactions, seed=1, start="2026-01-05T00:00:00Z")
        groups: dict[str, list[dict]] = {}
        for e in events:
            groups.setdefault(e["interaction_id"], []).append(e)
        config = RewardConfig()
        records = [compute_record(g, config) for g in groups.values()]
        producer = Producer(reliable_producer(bootstrap))
        for r in records:
            producer.produce(names.rewards, orjson.dumps(r.to_json_dict()),
                             rewards_key(r.org_id, r.interaction_id))  # fmt: skip
            producer.poll(0)
        assert producer.flush(60) == 0
        produce(bootstrap, names.events, events)

        exported, cpu_us = export_rate(bootstrap, names, len(records), args.max_batch)

        log = args.work / "worker.log"
        log.unlink(missing_ok=True)
        proc = worker(bootstrap, names.prefix, args.work / names.prefix, log,
                      "--group-id", f"bench-{names.prefix}")  # fmt: skip
        try:
            join = join_rate(log, proc.pid, len(events), timeout=900)
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(60)
        worker_rewards = join.per_s * len(records) / len(events)

    print(f"interactions={len(records)} events={len(events)} max_batch={args.max_batch}")
    print(f"{'row':<58} {'rewards/s':>10}")
    print(f"{'rtrl otel export -> local OTLP/HTTP logs receiver':<58} {exported:>10,.0f}"
          f"   ({cpu_us:.0f} µs CPU/reward, receiver included)")  # fmt: skip
    print(f"{'rtrl stream worker writing rewards (same run, same data)':<58} "
          f"{worker_rewards:>10,.0f}   ({join.per_s:,.0f} events/s)")  # fmt: skip
    print(f"exporter / worker: {exported / worker_rewards:.1f}x")
    write_results("otel_export", {
        "interactions": len(records), "events": len(events), "max_batch": args.max_batch,
        "export_rewards_per_s": exported, "export_cpu_us_per_reward": cpu_us,
        "worker_rewards_per_s": worker_rewards, "worker_events_per_s": join.per_s,
    })  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
