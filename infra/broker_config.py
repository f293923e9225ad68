"""What a local KRaft cluster looks like on disk: pure functions, no processes.

Every node runs combined (broker + controller) so that one node is a whole cluster and
three nodes survive the loss of one. Node ``i`` listens for clients on ``port + i`` and
for the controller quorum on ``port + nodes + i``.
"""

from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ClusterLayout:
    """Where a local cluster lives and which loopback ports it uses."""

    data_dir: Path
    port: int = 9092
    nodes: int = 1
    host: str = "127.0.0.1"

    def __post_init__(self) -> None:
        if self.nodes < 1 or self.nodes > 9:
            raise ValueError(f"nodes must be 1..9, got {self.nodes}")
        if not 1024 <= self.port <= 65535 - 2 * self.nodes:
            raise ValueError(f"port {self.port} leaves no room for {self.nodes} node(s)")

    def client_port(self, node: int) -> int:
        return self.port + node

    def controller_port(self, node: int) -> int:
        return self.port + self.nodes + node

    def all_ports(self) -> list[int]:
        return [
            p for i in range(self.nodes) for p in (self.client_port(i), self.controller_port(i))
        ]

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{self.host}:{self.client_port(i)}" for i in range(self.nodes))

    def node_dir(self, node: int) -> Path:
        return self.data_dir / f"node-{node}"

    @property
    def state_file(self) -> Path:
        return self.data_dir / "cluster.json"


def new_cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, URL-safe base64 without padding (22 chars).

    Like Kafka's own ``Uuid.randomUuid``, never one that starts with ``-``: the storage tool
    would read it as an option.

    >>> ids = [new_cluster_id() for _ in range(500)]
    >>> all(not i.startswith("-") and len(i) == 22 for i in ids)
    True
    """
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


def server_properties(layout: ClusterLayout, node: int) -> str:
    """The ``server.properties`` of one node of the cluster."""
    n = layout.nodes
    h = layout.host
    voters = ",".join(f"{i + 1}@{h}:{layout.controller_port(i)}" for i in range(n))
    replication = min(3, n)
    props = {
        "process.roles": "broker,controller",
        "node.id": node + 1,
        "controller.quorum.voters": voters,
        "listeners": f"PLAINTEXT://{h}:{layout.client_port(node)},"
        f"CONTROLLER://{h}:{layout.controller_port(node)}",
        "advertised.listeners": f"PLAINTEXT://{h}:{layout.client_port(node)}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str(layout.node_dir(node) / "data"),
        # Topics are declared and applied by `rtrl topics apply`; a typo must not create one.
        "auto.create.topics.enable": "false",
        "num.partitions": 3,
        "default.replication.factor": replication,
        "offsets.topic.replication.factor": replication,
        "offsets.topic.num.partitions": 10,
        "transaction.state.log.replication.factor": replication,
        "transaction.state.log.min.isr": min(2, n),
        "transaction.state.log.num.partitions": 10,
        "share.coordinator.state.topic.replication.factor": replication,
        "share.coordinator.state.topic.min.isr": min(2, n),
        # Local clusters serve tests and a laptop: rebalance at once, keep small segments.
        "group.initial.rebalance.delay.ms": 0,
        "log.segment.bytes": 64 * 1024 * 1024,
        "log.retention.check.interval.ms": 60_000,
    }
    return "".join(f"{k}={v}\n" for k, v in props.items())


def log4j2_properties(log_file: Path) -> str:
    """Broker logging to one rolling file per node, so a failure can be read afterwards."""
    return f"""status = warn
appender.file.type = RollingFile
appender.file.name = file
appender.file.fileName = {log_file}
appender.file.filePattern = {log_file}.%i
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
appender.file.policies.type = Policies
appender.file.policies.size.type = SizeBasedTriggeringPolicy
appender.file.policies.size.size = 50MB
appender.file.strategy.type = DefaultRolloverStrategy
appender.file.strategy.max = 3
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.apache.name = org.apache.kafka
logger.apache.level = INFO
"""
