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
    secure: bool = False
    """Clients connect with SASL_SSL (SCRAM-SHA-512 over TLS) under ACLs; see ``infra.secure``."""

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

    @property
    def secure_dir(self) -> Path:
        """The secured cluster's CA, certificates and each service's client settings."""
        return self.data_dir / "secure"


@dataclass(frozen=True)
class ListenerSecrets:
    """What the brokers of a secured cluster need to know of its secrets."""

    admin_password: str
    """The SCRAM user ``admin``: the brokers talk to each other as it."""
    controller_password: str
    """The static PLAIN user ``controller`` of the controller quorum (KRaft controllers cannot
    use SCRAM: its credentials live in the metadata they serve)."""
    keystore: Path
    keystore_password: str
    truststore: Path
    """The CA clients' certificates must be signed by, PEM."""


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


def server_properties(
    layout: ClusterLayout, node: int, secrets: ListenerSecrets | None = None
) -> str:
    """The ``server.properties`` of one node of the cluster (``secrets`` when it is secure)."""
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
    if layout.secure:
        if secrets is None:
            raise ValueError("a secure cluster's properties need its secrets")
        props.update(secure_properties(layout, node, secrets))
    return "".join(f"{k}={v}\n" for k, v in props.items())


def secure_properties(layout: ClusterLayout, node: int, secrets: ListenerSecrets) -> dict:
    """The listeners of a secured node: SASL_SSL for clients and brokers (SCRAM-SHA-512, with
    client certificates required), SASL PLAIN for the controller quorum, and ACLs enforced.

    >>> s = ListenerSecrets("a", "c", Path("k.p12"), "k", Path("ca.pem"))
    >>> props = secure_properties(ClusterLayout(Path("/d"), secure=True), 0, s)
    >>> props["listeners"], props["allow.everyone.if.no.acl.found"]
    ('SASL_SSL://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093', 'false')
    """
    h = layout.host
    scram = "org.apache.kafka.common.security.scram.ScramLoginModule"
    plain = "org.apache.kafka.common.security.plain.PlainLoginModule"
    return {
        "listeners": f"SASL_SSL://{h}:{layout.client_port(node)},"
        f"CONTROLLER://{h}:{layout.controller_port(node)}",
        "advertised.listeners": f"SASL_SSL://{h}:{layout.client_port(node)}",
        "inter.broker.listener.name": "SASL_SSL",
        "listener.security.protocol.map": "SASL_SSL:SASL_SSL,CONTROLLER:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "sasl.mechanism.controller.protocol": "PLAIN",
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": (
            f'{scram} required username="admin" password="{secrets.admin_password}";'
        ),
        "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.controller.plain.sasl.jaas.config": (
            f'{plain} required username="controller" '
            f'password="{secrets.controller_password}" '
            f'user_controller="{secrets.controller_password}";'
        ),
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": str(secrets.keystore),
        "ssl.keystore.password": secrets.keystore_password,
        "ssl.key.password": secrets.keystore_password,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(secrets.truststore),
        # Mutual TLS on a SASL_SSL listener only counts with the listener's prefix (KIP-684).
        "listener.name.sasl_ssl.ssl.client.auth": "required",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin;User:controller",
        "allow.everyone.if.no.acl.found": "false",
    }


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
