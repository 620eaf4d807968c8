"""Hollow racks, the pure parts: the generated topology, which racks are full, what a hollow
node's services show on its Node, the informer census, and the options ``up`` refuses."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import msgspec
import pytest

from shared.command_errors import UsageError
from shared.crds.names import CLIQUE_LABEL, DRIVER_NAME, IMEX_READY_CONDITION
from shared.kube.informer import Informer
from shared.kube.resources import NODES
from sim.control.up import UpOptions, up
from sim.hollow import nodeservices
from sim.kubelet.models import Node
from sim.nodehost.informers import census
from sim.topology import load_topology
from sim.topology.generate import nvl72_racks, write_topology


def test_a_generated_topology_has_n_nvl72_racks_each_its_own_clique(tmp_path: Path) -> None:
    cluster = load_topology(write_topology(nvl72_racks(256), tmp_path / "t.yaml"))
    assert len(cluster.nodes) == 256 * 18
    assert all(len(node.gpus) == 4 for node in cluster.nodes)
    assert len(cluster.cliques) == 256
    assert len({node.address for node in cluster.nodes}) == len(cluster.nodes)
    assert cluster.nodes[-1].name == "rack-255-tray17"


def test_no_rack_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one rack"):
        nvl72_racks(0)


def test_the_first_m_racks_are_full(tmp_path: Path) -> None:
    cluster = load_topology(write_topology(nvl72_racks(3), tmp_path / "t.yaml"))
    assert {node.rack for node in cluster.first_racks(1)} == {"rack-0"}
    assert len(cluster.first_racks(2)) == 36
    assert cluster.first_racks(None) == cluster.nodes
    assert cluster.first_racks(0) == ()


def _node_with(body: dict[str, object]) -> Node:
    return msgspec.convert(body, type=Node)


def test_a_registered_hollow_node_shows_what_its_services_would_write(tmp_path: Path) -> None:
    node = load_topology(write_topology(nvl72_racks(2), tmp_path / "t.yaml")).nodes[20]
    patch = nodeservices.metadata_patch(node)
    shown = _node_with(
        {
            "metadata": {"name": node.name, **patch["metadata"]},
            "status": {"conditions": nodeservices.conditions_body(datetime.now(UTC))},
        }
    )
    assert nodeservices.published(shown, node)
    assert shown.metadata.labels[CLIQUE_LABEL] == node.clique
    assert shown.metadata.annotations["cdo.dev/imex-slot"] == str(node.tray_index)
    without_label = _node_with(
        {
            "metadata": {"name": node.name, "annotations": patch["metadata"]["annotations"]},
            "status": {"conditions": nodeservices.conditions_body(datetime.now(UTC))},
        }
    )
    assert not nodeservices.published(without_label, node)
    imex_false = [
        {**c, "status": "False"} if c["type"] == IMEX_READY_CONDITION else c
        for c in nodeservices.conditions_body(datetime.now(UTC))
    ]
    assert not nodeservices.published(
        _node_with(
            {
                "metadata": {"name": node.name, **patch["metadata"]},
                "status": {"conditions": imex_false},
            }
        ),
        node,
    )


def test_a_hollow_nodes_slice_is_the_agents_with_two_attachments_per_gpu(tmp_path: Path) -> None:
    node = load_topology(write_topology(nvl72_racks(1), tmp_path / "t.yaml")).nodes[0]
    body = nodeservices.channel_slice(node, node_uid="uid-1")
    assert body["spec"]["driver"] == DRIVER_NAME
    assert body["spec"]["nodeName"] == node.name
    devices = body["spec"]["devices"]
    assert [d["name"] for d in devices] == [f"attach-{i}" for i in range(8)]
    assert {d["attributes"]["clique"]["string"] for d in devices} == {node.clique}


class _Service:
    """Informers kept as a service keeps them: directly, in a part, in a dict."""

    def __init__(self, informers: list[Informer[Node]]) -> None:
        self.nodes = informers[0]
        self.part = type("Part", (), {})()
        self.part.by_name = {"again": informers[1]}
        self.same = informers[0]  # counted once


async def test_the_census_counts_every_informer_reachable_once() -> None:
    informers = [Informer(None, NODES, Node) for _ in range(2)]  # type: ignore[arg-type]
    for held, informer in zip((2, 3), informers, strict=True):
        informer.cache.replace(_node_with({"metadata": {"name": f"n{n}"}}) for n in range(held))
    assert census(_Service(informers)) == {"nodes": 5}


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"racks": 2, "topology": Path("x.yaml")}, "leave out --topology"),
        ({"racks": 0}, "--racks must be 1 or more"),
        ({"full_racks": -1}, "--full-racks must be 0 or more"),
        ({"full_racks": 1, "nodes": "rack-0-*"}, "leave out --nodes"),
    ],
)
def test_up_refuses_options_that_do_not_go_together(
    tmp_path: Path, changes: dict[str, object], message: str
) -> None:
    base: dict[str, object] = {
        "state_dir": tmp_path,
        "topology": None,
        "nats_url": None,
        "nodes": "*",
        "imex_server_port": None,
        "imex_cmd_port": None,
        "wait": False,
        "timeout_s": 1.0,
    }
    options = UpOptions(**{**base, **changes})  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=message):
        up(options, say=lambda _line: None)
