"""The topology file format and its expansion into nodes and GPUs."""

from __future__ import annotations

import ipaddress
import re
import uuid
from pathlib import Path

import pytest

from sim.topology import (
    DEFAULT_CLIQUE_ID,
    TOPOLOGIES_DIR,
    Cluster,
    TopologyError,
    load_topology,
    parse_topology,
)
from sim.topology.trays import parse_trays

GPU_UUID = re.compile(r"^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def test_default_topology_is_two_racks_of_eighteen_trays_with_four_gpus(cluster: Cluster) -> None:
    assert list(cluster.racks) == ["rack-0", "rack-1"]
    for nodes in cluster.racks.values():
        assert [node.tray_index for node in nodes] == list(range(18))
        assert all(len(node.gpus) == 4 for node in nodes)
    assert len(cluster.nodes) == 36


def test_default_topology_has_one_clique_per_rack(cluster: Cluster) -> None:
    cliques = cluster.cliques
    assert len(cliques) == 2
    for clique, nodes in cliques.items():
        assert {node.rack for node in nodes} == {nodes[0].rack}
        assert clique == f"{uuid.UUID(nodes[0].cluster_uuid)}.{DEFAULT_CLIQUE_ID}"
    # Same cliqueId in both racks: only the full string tells the cliques apart.
    assert {node.clique_id for node in cluster.nodes} == {DEFAULT_CLIQUE_ID}


def test_empty_file_is_the_default_topology(cluster: Cluster) -> None:
    assert parse_topology("") == cluster


def test_node_addresses_are_unique_loopback_addresses_never_127_0_0_1(cluster: Cluster) -> None:
    addresses = [ipaddress.IPv4Address(node.address) for node in cluster.nodes]
    assert len(set(addresses)) == len(addresses)
    assert all(address in ipaddress.IPv4Network("127.0.0.0/8") for address in addresses)
    assert ipaddress.IPv4Address("127.0.0.1") not in addresses
    assert cluster.node("rack-1-tray04").address == "127.10.1.5"


def test_gpu_identities_are_well_formed_and_unique(cluster: Cluster) -> None:
    gpus = [gpu for node in cluster.nodes for gpu in node.gpus]
    assert all(GPU_UUID.match(gpu.uuid) for gpu in gpus)
    assert len({gpu.uuid for gpu in gpus}) == len(gpus)
    assert len({gpu.serial for gpu in gpus}) == len(gpus)
    first = cluster.nodes[0]
    assert [gpu.pci_bus_id for gpu in first.gpus] == [
        "00000008:01:00.0",
        "00000009:01:00.0",
        "00000018:01:00.0",
        "00000019:01:00.0",
    ]
    assert [gpu.index for gpu in first.gpus] == [0, 1, 2, 3]


def test_racks_are_distinct_nvlink_domains(cluster: Cluster) -> None:
    assert len({node.cluster_uuid for node in cluster.nodes}) == 2
    node = cluster.nodes[0]
    assert uuid.UUID(bytes=node.cluster_uuid_bytes) == uuid.UUID(node.cluster_uuid)


def test_expansion_is_deterministic_and_seeded_by_the_topology_name() -> None:
    assert parse_topology("name: a") == parse_topology("name: a")
    first, second = parse_topology("name: a"), parse_topology("name: b")
    assert first.nodes[0].gpus[0].uuid != second.nodes[0].gpus[0].uuid
    assert first.nodes[0].cluster_uuid != second.nodes[0].cluster_uuid


def test_rack_can_be_split_into_cliques_by_tray_ranges() -> None:
    cluster = parse_topology(
        """
        racks:
          - name: r
            cluster_uuid: 6f0b6a9c-1b8e-4a52-9e2b-2a1e5b7a0c11
            cliques:
              - {id: 7, trays: "0-8"}
              - {id: 9, trays: "9-16,17"}
        """
    )
    assert {clique: len(nodes) for clique, nodes in cluster.cliques.items()} == {
        "6f0b6a9c-1b8e-4a52-9e2b-2a1e5b7a0c11.7": 9,
        "6f0b6a9c-1b8e-4a52-9e2b-2a1e5b7a0c11.9": 9,
    }
    assert cluster.node("r-tray08").clique_id == 7
    assert cluster.node("r-tray09").clique_id == 9


def test_rack_overrides_sizes_and_driver() -> None:
    cluster = parse_topology(
        """
        node_name: "{topology}-{rack_index}-{tray}"
        racks:
          - name: small
            nodes: 2
            gpus_per_node: 2
            driver: {version: 560.35.03, fabric_info_v3: false}
        """
    )
    assert [node.name for node in cluster.nodes] == ["sim-0-0", "sim-0-1"]
    assert all(len(node.gpus) == 2 for node in cluster.nodes)
    assert not cluster.nodes[0].driver.fabric_info_v3
    assert cluster.nodes[0].driver.version == "560.35.03"


@pytest.mark.parametrize("path", sorted(TOPOLOGIES_DIR.glob("*.yaml")), ids=lambda path: path.stem)
def test_every_shipped_topology_loads(path: Path) -> None:
    assert load_topology(path).nodes


def test_eight_rack_topology_has_the_benchmark_size() -> None:
    cluster = load_topology(TOPOLOGIES_DIR / "eight-racks.yaml")
    assert len(cluster.nodes) == 144
    assert sum(len(node.gpus) for node in cluster.nodes) == 576
    assert len(cluster.cliques) == 8


@pytest.mark.parametrize(
    ("text", "trays"),
    [("0-3", (0, 1, 2, 3)), ("5", (5,)), (5, (5,)), ("0-1, 4 ,6-7", (0, 1, 4, 6, 7))],
)
def test_tray_ranges(text: str | int, trays: tuple[int, ...]) -> None:
    assert parse_trays(text) == trays


SOME_UUID = "6f0b6a9c-1b8e-4a52-9e2b-2a1e5b7a0c11"
SPLIT = "racks: [{name: a}, {name: b, cliques: [%s]}]"

BAD_TOPOLOGIES = {
    "tray outside the rack": (
        SPLIT % "{id: 1, trays: 0-18}",
        "racks[1].cliques[0].trays: tray 18 is outside",
    ),
    "trays in no clique": (SPLIT % "{id: 1, trays: 0-8}", "racks[1].cliques: trays 9-17"),
    "tray in two cliques": (
        SPLIT % "{id: 1, trays: 0-9}, {id: 2, trays: 9-17}",
        "racks[1].cliques[1].trays: tray 9 is already in racks[1].cliques[0]",
    ),
    "duplicate clique id": (
        SPLIT % "{id: 1, trays: 0-8}, {id: 1, trays: 9-17}",
        "racks[1].cliques[1].id",
    ),
    "backwards range": (SPLIT % "{id: 1, trays: 8-3}", "racks[1].cliques[0].trays: range 8-3"),
    "garbled range": (SPLIT % "{id: 1, trays: a-b}", "racks[1].cliques[0].trays"),
    "clique id of the wrong type": (
        SPLIT % "{id: one, trays: 0-17}",
        "racks[1].cliques[0].id: Expected int, got str",
    ),
    "clique id out of range": (SPLIT % "{id: -1, trays: 0-17}", "racks[1].cliques[0].id"),
    "no cliques listed": (SPLIT % "", "racks[1].cliques: must list at least one clique"),
    "unknown field": ("racks: [{name: a, gpus: 4}]", "racks[0]: Object contains unknown field"),
    "too many trays": ("nodes_per_rack: 19", "nodes_per_rack: Expected int <= 18"),
    "too many gpus": ("racks: [{name: a, gpus_per_node: 9}]", "racks[0].gpus_per_node"),
    "bad rack name": ("racks: [{name: Rack_0}]", "racks[0].name"),
    "duplicate rack name": ("racks: [{name: a}, {name: a}]", "racks[1].name"),
    "no racks": ("racks: []", "racks: must list at least one rack"),
    "bad cluster uuid": ("racks: [{name: a, cluster_uuid: nope}]", "racks[0].cluster_uuid"),
    "shared cluster uuid": (
        f"racks: [{{name: a, cluster_uuid: {SOME_UUID}}}, {{name: b, cluster_uuid: {SOME_UUID}}}]",
        "racks[1].cluster_uuid",
    ),
    "address outside loopback": ("address_base: 10.0.0.0", "address_base: 10.0.0.0 is outside"),
    "address of the servers": ("address_base: 127.0.0.0", "address_base: 127.0.0.1 is kept"),
    "address not a network": ("address_base: 127.10.0.7", "address_base"),
    "unknown placeholder": ("node_name: '{rack}-{slot}'", "node_name"),
    "names that collide": ("node_name: '{tray}'", "node_name: '{tray}' gives two nodes"),
    "invalid node name": ("node_name: '{rack}_{tray}'", "node_name: yields 'rack-0_0'"),
    "driver field of the wrong type": ("driver: {fabric_info_v3: maybe}", "driver.fabric_info_v3"),
    "not a mapping": ("- 1", "(document): Expected object, got array"),
    "not YAML": ("racks: [", "(document): not valid YAML"),
}


@pytest.mark.parametrize(("text", "message"), BAD_TOPOLOGIES.values(), ids=BAD_TOPOLOGIES.keys())
def test_bad_topology_is_rejected_naming_the_field(text: str, message: str) -> None:
    with pytest.raises(TopologyError) as raised:
        parse_topology(text)
    assert message in str(raised.value)


def test_bad_topology_file_error_names_the_file_and_the_field(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(SPLIT % "{id: 1, trays: 0-18}")
    with pytest.raises(TopologyError) as raised:
        load_topology(path)
    assert str(raised.value).startswith(f"{path}: racks[1].cliques[0].trays: ")
    assert raised.value.field == "racks[1].cliques[0].trays"


def test_missing_file_is_a_topology_error(tmp_path: Path) -> None:
    with pytest.raises(TopologyError, match="cannot be read"):
        load_topology(tmp_path / "absent.yaml")


SCHEDULING = """
racks:
  - name: rack-0
    nodes: 4
    labels: {pool: general}
    taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]
    allocatable: {memory: 480Gi}
    node_groups:
      - trays: 2-3
        labels: {pool: training, tier: a}
        taints: []
        allocatable: {cpu: "72"}
"""


def test_racks_and_node_groups_set_labels_taints_and_allocatable_per_tray() -> None:
    nodes = parse_topology(SCHEDULING).racks["rack-0"]
    assert [node.labels for node in nodes] == [
        {"pool": "general"},
        {"pool": "general"},
        {"pool": "training", "tier": "a"},
        {"pool": "training", "tier": "a"},
    ]
    assert [len(node.taints) for node in nodes] == [1, 1, 0, 0]
    assert nodes[0].taints[0].effect == "NoSchedule"
    assert nodes[0].allocatable == {"memory": "480Gi"}
    assert nodes[3].allocatable == {"memory": "480Gi", "cpu": "72"}


@pytest.mark.parametrize(
    ("fragment", "field"),
    [
        ("allocatable: {memory: lots}", "racks[0].allocatable.memory"),
        ("allocatable: {pods: 1.5}", "racks[0].allocatable.pods"),
        ("node_groups: [{trays: 7}]", "racks[0].node_groups[0].trays"),
    ],
)
def test_a_bad_scheduling_field_names_itself(fragment: str, field: str) -> None:
    with pytest.raises(TopologyError) as caught:
        parse_topology(f"racks:\n  - name: r\n    nodes: 4\n    {fragment}\n")
    assert caught.value.field == field


def test_the_kubelet_registers_the_topologys_labels_taints_and_allocatable() -> None:
    from datetime import UTC, datetime

    from sim.kubelet.nodeobject import registration_body
    from sim.kubelet.settings import KubeletSettings

    node = parse_topology(SCHEDULING).racks["rack-0"][0]
    body = registration_body(node, KubeletSettings(), labels={}, now=datetime.now(UTC))
    assert body["metadata"]["labels"]["pool"] == "general"
    assert body["spec"]["taints"] == [
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    ]
    assert body["status"]["allocatable"]["memory"] == "480Gi"
    assert body["status"]["allocatable"]["cpu"] == "144"
