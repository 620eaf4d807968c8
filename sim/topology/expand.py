"""Expand a :class:`TopologySpec` into concrete nodes and GPUs, checking the rules that span
several fields (clique coverage, unique names and UUIDs, addresses inside 127.0.0.0/8).
"""

from __future__ import annotations

import ipaddress
import re
import uuid

from sim.topology import identity
from sim.topology.errors import TopologyError
from sim.topology.model import Cluster, Gpu, Node
from sim.topology.scheduling import tray_scheduling
from sim.topology.spec import CliqueSpec, DriverSpec, RackSpec, TopologySpec
from sim.topology.trays import parse_trays

# A DNS-1123 subdomain, which Kubernetes requires of node names.
_NODE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_NODE_NAME_MAX = 253

_LOOPBACK = ipaddress.IPv4Network("127.0.0.0/8")
# Servers of the simulated cluster (API emulator, NATS) listen on 127.0.0.1; nodes never do.
_SERVER_ADDRESS = ipaddress.IPv4Address("127.0.0.1")

# The id the single clique of an unpartitioned rack gets. Every rack uses the same id, as
# racks partitioned alike do in practice, so code that groups by cliqueId alone fails.
DEFAULT_CLIQUE_ID = 1


def expand(spec: TopologySpec) -> Cluster:
    """The cluster ``spec`` describes; TopologyError names the first offending field."""
    base = _address_base(spec.address_base)
    _check_rack_names(spec.racks)
    _check_cluster_uuids(spec)
    nodes: list[Node] = []
    for rack_index, rack in enumerate(spec.racks):
        nodes.extend(_expand_rack(spec, rack, rack_index=rack_index, base=base))
    _check_unique_node_names(nodes, spec)
    return Cluster(name=spec.name, nodes=tuple(nodes))


def _expand_rack(
    spec: TopologySpec, rack: RackSpec, *, rack_index: int, base: ipaddress.IPv4Address
) -> list[Node]:
    where = f"racks[{rack_index}]"
    tray_count = rack.nodes or spec.nodes_per_rack
    gpu_count = rack.gpus_per_node or spec.gpus_per_node
    driver: DriverSpec = rack.driver or spec.driver
    cluster = rack.cluster_uuid or identity.cluster_uuid(topology=spec.name, rack=rack.name)
    cluster = str(uuid.UUID(cluster))
    chassis = rack.chassis_serial or identity.chassis_serial(topology=spec.name, rack=rack.name)
    if not rack.nvlink and rack.cliques is not None:
        raise TopologyError(f"{where}.cliques", "a rack without NVLink (nvlink: false) has none")
    clique_of_tray = _clique_ids_by_tray(rack.cliques, tray_count=tray_count, where=where)
    scheduling = tray_scheduling(rack, tray_count=tray_count, where=where)
    nodes = []
    for tray in range(tray_count):
        name = _node_name(spec, rack=rack.name, rack_index=rack_index, tray=tray)
        address = _node_address(base, rack_index=rack_index, tray=tray)
        nodes.append(
            Node(
                name=name,
                address=address,
                rack=rack.name,
                rack_index=rack_index,
                tray_index=tray,
                slot_number=identity.slot_number(tray),
                cluster_uuid=cluster,
                clique_id=clique_of_tray[tray],
                chassis_serial=chassis,
                driver=driver,
                gpus=tuple(_gpu(spec.name, name, index) for index in range(gpu_count)),
                nvlink=rack.nvlink,
                gpu_api=rack.gpu_api,
                labels=scheduling[tray].labels,
                taints=scheduling[tray].taints,
                allocatable=scheduling[tray].allocatable,
            )
        )
    return nodes


def _gpu(topology: str, node: str, index: int) -> Gpu:
    return Gpu(
        index=index,
        uuid=identity.gpu_uuid(topology=topology, node=node, index=index),
        serial=identity.gpu_serial(topology=topology, node=node, index=index),
        pci_bus_id=identity.pci_bus_id(index),
        minor_number=index,
        module_id=index + 1,
        ib_guid=identity.ib_guid(topology=topology, node=node, index=index),
    )


def _clique_ids_by_tray(
    cliques: tuple[CliqueSpec, ...] | None, *, tray_count: int, where: str
) -> dict[int, int]:
    if cliques is None:
        return dict.fromkeys(range(tray_count), DEFAULT_CLIQUE_ID)
    if not cliques:
        raise TopologyError(f"{where}.cliques", "must list at least one clique (or be left out)")
    owner: dict[int, int] = {}
    clique_of_tray: dict[int, int] = {}
    seen_ids: dict[int, int] = {}
    for position, clique in enumerate(cliques):
        field = f"{where}.cliques[{position}]"
        if clique.id in seen_ids:
            raise TopologyError(
                f"{field}.id",
                f"clique id {clique.id} is already used by cliques[{seen_ids[clique.id]}]",
            )
        seen_ids[clique.id] = position
        try:
            trays = parse_trays(clique.trays)
        except ValueError as error:
            raise TopologyError(f"{field}.trays", str(error)) from None
        for tray in trays:
            if tray >= tray_count:
                raise TopologyError(
                    f"{field}.trays", f"tray {tray} is outside the rack's trays 0..{tray_count - 1}"
                )
            if tray in owner:
                raise TopologyError(
                    f"{field}.trays", f"tray {tray} is already in {where}.cliques[{owner[tray]}]"
                )
            owner[tray] = position
            clique_of_tray[tray] = clique.id
    missing = [tray for tray in range(tray_count) if tray not in owner]
    if missing:
        raise TopologyError(
            f"{where}.cliques", f"trays {_ranges(missing)} belong to no clique; list every tray"
        )
    return clique_of_tray


def _ranges(trays: list[int]) -> str:
    """Compact form of a sorted tray list, for messages: [0, 1, 2, 5] -> "0-2,5"."""
    parts: list[str] = []
    start = previous = trays[0]
    for tray in [*trays[1:], None]:
        if tray is not None and tray == previous + 1:
            previous = tray
            continue
        parts.append(str(start) if start == previous else f"{start}-{previous}")
        if tray is not None:
            start = previous = tray
    return ",".join(parts)


def _node_name(spec: TopologySpec, *, rack: str, rack_index: int, tray: int) -> str:
    try:
        name = spec.node_name.format(
            topology=spec.name, rack=rack, rack_index=rack_index, tray=tray
        )
    except (KeyError, IndexError, ValueError) as error:
        raise TopologyError(
            "node_name",
            f"{spec.node_name!r} is not a valid template ({error!r}); "
            "placeholders are {topology}, {rack}, {rack_index}, {tray}",
        ) from None
    if len(name) > _NODE_NAME_MAX or not _NODE_NAME.match(name):
        raise TopologyError(
            "node_name", f"yields {name!r}, which is not a valid Kubernetes node name"
        )
    return name


def _address_base(text: str) -> ipaddress.IPv4Address:
    try:
        base = ipaddress.IPv4Address(text)
    except ValueError:
        raise TopologyError("address_base", f"{text!r} is not an IPv4 address") from None
    if base not in _LOOPBACK:
        raise TopologyError("address_base", f"{text} is outside 127.0.0.0/8")
    if int(base) % 256:
        raise TopologyError("address_base", f"{text} must end in .0 so that trays count from .1")
    return base


def _node_address(base: ipaddress.IPv4Address, *, rack_index: int, tray: int) -> str:
    address = identity.node_address(base=base, rack_index=rack_index, tray_index=tray)
    if ipaddress.IPv4Address(address) not in _LOOPBACK:
        raise TopologyError(
            "address_base", f"rack {rack_index} tray {tray} would get {address}, outside 127/8"
        )
    if ipaddress.IPv4Address(address) == _SERVER_ADDRESS:
        raise TopologyError(
            "address_base", "127.0.0.1 is kept for servers; choose a base such as 127.10.0.0"
        )
    return address


def _check_rack_names(racks: tuple[RackSpec, ...]) -> None:
    if not racks:
        raise TopologyError("racks", "must list at least one rack")
    first_seen: dict[str, int] = {}
    for index, rack in enumerate(racks):
        if rack.name in first_seen:
            raise TopologyError(
                f"racks[{index}].name", f"{rack.name!r} is already racks[{first_seen[rack.name]}]"
            )
        first_seen[rack.name] = index


def _check_cluster_uuids(spec: TopologySpec) -> None:
    first_seen: dict[str, int] = {}
    for index, rack in enumerate(spec.racks):
        field = f"racks[{index}].cluster_uuid"
        if rack.cluster_uuid is None:
            continue
        try:
            canonical = str(uuid.UUID(rack.cluster_uuid))
        except ValueError:
            raise TopologyError(field, f"{rack.cluster_uuid!r} is not a UUID") from None
        if canonical in first_seen:
            raise TopologyError(
                field, f"{canonical} is already the NVLink domain of racks[{first_seen[canonical]}]"
            )
        first_seen[canonical] = index


def _check_unique_node_names(nodes: list[Node], spec: TopologySpec) -> None:
    seen: set[str] = set()
    for node in nodes:
        if node.name in seen:
            raise TopologyError(
                "node_name",
                f"{spec.node_name!r} gives two nodes the name {node.name!r}; "
                "include {rack} or {rack_index} and {tray}",
            )
        seen.add(node.name)
