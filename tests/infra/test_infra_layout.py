"""``ClusterLayout`` and ``server_properties``: the on-disk shape of a local cluster, no JVM."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from infra.broker_config import ClusterLayout, new_cluster_id, server_properties


def _props(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if line)


def test_ports_of_a_three_node_cluster():
    layout = ClusterLayout(Path("/d"), port=20000, nodes=3)
    assert [layout.client_port(i) for i in range(3)] == [20000, 20001, 20002]
    assert [layout.controller_port(i) for i in range(3)] == [20003, 20004, 20005]
    assert sorted(layout.all_ports()) == list(range(20000, 20006))
    assert layout.bootstrap == "127.0.0.1:20000,127.0.0.1:20001,127.0.0.1:20002"
    assert layout.node_dir(2) == Path("/d/node-2")
    assert layout.state_file == Path("/d/cluster.json")


@pytest.mark.parametrize("port,nodes", [(9092, 0), (9092, 10), (80, 1), (65535, 1), (65530, 3)])
def test_impossible_layouts_are_rejected(port, nodes):
    with pytest.raises(ValueError):
        ClusterLayout(Path("/d"), port=port, nodes=nodes)


def test_server_properties_of_a_three_node_cluster():
    layout = ClusterLayout(Path("/d"), port=20000, nodes=3)
    p = _props(server_properties(layout, 1))
    assert p["process.roles"] == "broker,controller"
    assert p["node.id"] == "2"
    assert p["controller.quorum.voters"] == (
        "1@127.0.0.1:20003,2@127.0.0.1:20004,3@127.0.0.1:20005"
    )
    assert p["listeners"] == "PLAINTEXT://127.0.0.1:20001,CONTROLLER://127.0.0.1:20004"
    assert p["advertised.listeners"] == "PLAINTEXT://127.0.0.1:20001"
    assert p["log.dirs"] == "/d/node-1/data"
    assert p["auto.create.topics.enable"] == "false"
    assert p["default.replication.factor"] == p["offsets.topic.replication.factor"] == "3"
    assert p["transaction.state.log.min.isr"] == "2"
    assert "zookeeper.connect" not in p


def test_server_properties_of_one_node_need_no_replicas():
    p = _props(server_properties(ClusterLayout(Path("/d"), port=30000), 0))
    assert p["node.id"] == "1"
    assert p["controller.quorum.voters"] == "1@127.0.0.1:30001"
    assert p["default.replication.factor"] == p["offsets.topic.replication.factor"] == "1"
    assert p["transaction.state.log.min.isr"] == "1"


def test_cluster_ids_are_16_random_bytes_in_url_safe_base64():
    a, b = new_cluster_id(), new_cluster_id()
    assert a != b and len(a) == 22
    assert len(base64.urlsafe_b64decode(a + "==")) == 16
