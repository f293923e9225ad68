"""Start, stop and inspect a local Apache Kafka (KRaft) cluster from Maven Central's jars.

``start`` formats storage on first use, launches each node in its own process group,
waits until the cluster answers metadata with every node, records the pids in
``<data_dir>/cluster.json`` and returns, leaving the nodes running. ``stop`` finds them
again from that file, so any later process can stop what an earlier one started. A secure
cluster (``ClusterLayout.secure``) also gets its certificates, SCRAM users and ACLs
(``infra.secure``).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from infra.broker_config import (
    ClusterLayout,
    ListenerSecrets,
    log4j2_properties,
    new_cluster_id,
    server_properties,
)
from infra.kafka_dist import BrokerSetupError, check_java, ensure_jars
from infra.kafka_security import KafkaSecurity
from infra.topics import TopicNames

log = logging.getLogger(__name__)

MIN_FREE_DISK = 1 << 30  # a broker that cannot write its logs fails late and obscurely
HEAP = "-Xmx768m"


@dataclass(frozen=True)
class NodeProcess:
    node: int
    pid: int


def port_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child (ours, not yet reaped) is dead for our purposes.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def read_state(layout: ClusterLayout) -> dict | None:
    try:
        return json.loads(layout.state_file.read_text())
    except FileNotFoundError:
        return None


def running_nodes(layout: ClusterLayout) -> list[NodeProcess]:
    state = read_state(layout) or {}
    nodes = [NodeProcess(n["node"], n["pid"]) for n in state.get("processes", [])]
    return [n for n in nodes if pid_alive(n.pid)]


def _check_machine(layout: ClusterLayout) -> str:
    java = check_java()
    for port in layout.all_ports():
        if not port_free(layout.host, port):
            raise BrokerSetupError(
                f"port {port} on {layout.host} is in use; pick another with --port "
                f"(a cluster of {layout.nodes} node(s) needs {layout.all_ports()})"
            )
    layout.data_dir.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(layout.data_dir).free
    if free < MIN_FREE_DISK:
        raise BrokerSetupError(
            f"only {free >> 20} MiB free under {layout.data_dir}; Kafka needs at least "
            f"{MIN_FREE_DISK >> 20} MiB"
        )
    return java


def _format(
    java: str,
    libs: Path,
    layout: ClusterLayout,
    secrets: ListenerSecrets | None = None,
    format_args: list[str] | None = None,
) -> None:
    """Write each node's config and format its storage once (KRaft needs a cluster id; a secure
    cluster's SCRAM users are created with it, ``format_args``)."""
    state = read_state(layout) or {}
    cluster_id = state.get("cluster_id") or new_cluster_id()
    for node in range(layout.nodes):
        ndir = layout.node_dir(node)
        ndir.mkdir(parents=True, exist_ok=True)
        props = ndir / "server.properties"
        props.touch(mode=0o600)  # a secure node's holds the brokers' passwords: private first
        props.chmod(0o600)
        props.write_text(server_properties(layout, node, secrets))
        (ndir / "log4j2.properties").write_text(log4j2_properties(ndir / "kafka.log"))
        if (ndir / "data" / "meta.properties").exists():
            continue
        cmd = [
            java,
            "-cp",
            f"{libs}/*",
            "kafka.tools.StorageTool",
            "format",
            "-t",
            cluster_id,
            "-c",
            str(ndir / "server.properties"),
            "--ignore-formatted",
            *(format_args or []),
        ]
        done = subprocess.run(cmd, capture_output=True, text=True, env=_java_env(ndir), timeout=120)
        if done.returncode != 0:
            raise BrokerSetupError(f"formatting node {node} failed: {done.stderr.strip()[-800:]}")
    _write_state(layout, cluster_id, [])


def _java_env(node_dir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["KAFKA_LOG4J_OPTS"] = f"-Dlog4j2.configurationFile={node_dir / 'log4j2.properties'}"
    return env


def _write_state(layout: ClusterLayout, cluster_id: str, procs: list[NodeProcess]) -> None:
    state = {
        "cluster_id": cluster_id,
        "bootstrap": layout.bootstrap,
        "port": layout.port,
        "nodes": layout.nodes,
        "secure": layout.secure,
        "processes": [{"node": p.node, "pid": p.pid} for p in procs],
    }
    tmp = layout.state_file.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2))
    tmp.replace(layout.state_file)


def start_node(java: str, libs: Path, layout: ClusterLayout, node: int) -> NodeProcess:
    """Launch one node detached from our process group (a Ctrl-C here must not kill it)."""
    ndir = layout.node_dir(node)
    cmd = [
        java,
        HEAP,
        "-Xms128m",
        "-XX:+UseG1GC",
        "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={ndir / 'log4j2.properties'}",
        "-cp",
        f"{libs}/*",
        "kafka.Kafka",
        str(ndir / "server.properties"),
    ]
    with open(ndir / "stdout.log", "ab") as out:
        proc = subprocess.Popen(
            cmd,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    return NodeProcess(node, proc.pid)


def wait_ready(
    layout: ClusterLayout,
    procs: list[NodeProcess],
    timeout: float = 90.0,
    security: KafkaSecurity | None = None,
) -> None:
    """Return once the cluster's metadata lists every node; fail early if a node died."""
    from confluent_kafka.admin import AdminClient

    from infra.settings import admin

    client = AdminClient(
        admin(layout.bootstrap, security or KafkaSecurity(), log_level=0),
        logger=logging.getLogger("rtrl.broker.probe"),
    )
    deadline = time.monotonic() + timeout
    while True:
        dead = [p for p in procs if not pid_alive(p.pid)]
        if dead:
            raise BrokerSetupError(
                f"node {dead[0].node} exited during start-up; its log says:\n"
                + tail(layout.node_dir(dead[0].node) / "kafka.log")
            )
        try:
            md = client.list_topics(timeout=2)
            if len(md.brokers) == layout.nodes:
                return
        except Exception:  # noqa: BLE001 - not up yet; keep polling until the deadline
            pass
        if time.monotonic() > deadline:
            raise BrokerSetupError(
                f"the cluster did not answer metadata with {layout.nodes} node(s) "
                f"within {timeout:.0f}s; see {layout.node_dir(0) / 'kafka.log'}"
            )
        time.sleep(0.5)


def tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return f"({path} does not exist)"


def start(
    layout: ClusterLayout, cache_root: Path, timeout: float = 90.0, names: TopicNames | None = None
) -> str:
    """Start the cluster (idempotent: a cluster already running there is left as it is).

    A secure one grants its services their ACLs for the topics ``names`` gives.
    """
    alive = running_nodes(layout)
    if alive:
        if len(alive) == layout.nodes:
            log.info("cluster in %s already running at %s", layout.data_dir, layout.bootstrap)
            return layout.bootstrap
        raise BrokerSetupError(
            f"{len(alive)} of {layout.nodes} node(s) of {layout.data_dir} are running; "
            "stop them first with `rtrl broker stop`"
        )
    java = _check_machine(layout)
    libs = ensure_jars(cache_root, log=log.info)
    secured = None
    if layout.secure:
        from infra import secure

        secured = secure.prepare(layout, names or TopicNames())
        _format(java, libs, layout, secured.listener, secured.scram_format_args())
    else:
        _format(java, libs, layout)
    procs = [start_node(java, libs, layout, node) for node in range(layout.nodes)]
    state = read_state(layout) or {}
    _write_state(layout, state["cluster_id"], procs)
    try:
        if secured is None:
            wait_ready(layout, procs, timeout)
        else:
            admin_security = secured.security(secure.ADMIN_USER)
            wait_ready(layout, procs, timeout, admin_security)
            secure.apply_acls(layout.bootstrap, admin_security, names or TopicNames())
    except BaseException:
        stop(layout)
        raise
    log.info(
        "Kafka cluster of %d node(s) ready at %s (logs: %s)",
        layout.nodes,
        layout.bootstrap,
        layout.data_dir,
    )
    return layout.bootstrap


def kill_node(layout: ClusterLayout, node: int) -> None:
    """SIGKILL one node: for tests that prove what survives a broker crash."""
    for p in running_nodes(layout):
        if p.node == node:
            os.killpg(p.pid, signal.SIGKILL)
            _wait_dead([p], 10)


def _wait_dead(procs: list[NodeProcess], timeout: float) -> list[NodeProcess]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        procs = [p for p in procs if pid_alive(p.pid)]
        if not procs:
            return []
        time.sleep(0.2)
    return procs


def stop(layout: ClusterLayout, timeout: float = 30.0) -> int:
    """Shut every node down cleanly (SIGTERM), then SIGKILL stragglers. Returns nodes stopped."""
    procs = running_nodes(layout)
    for p in procs:
        try:
            os.killpg(p.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    left = _wait_dead(procs, timeout)
    for p in left:
        log.warning("node %d did not stop within %.0fs; killing it", p.node, timeout)
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    _wait_dead(left, 10)
    state = read_state(layout)
    if state:
        _write_state(layout, state["cluster_id"], [])
    return len(procs)
