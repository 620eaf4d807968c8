"""The concrete cluster a topology expands into: nodes with addresses, GPUs with UUIDs.

Everything here is a value: the simulated NVML, IMEX daemons and kubelets are built from
these and never change them.
"""

from __future__ import annotations

import uuid

import msgspec

from sim.topology.spec import DriverSpec, GpuApi, TaintSpec


class Gpu(msgspec.Struct, frozen=True, kw_only=True):
    """One GPU of a node, as NVML identifies it."""

    index: int
    uuid: str  # "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as nvmlDeviceGetUUID prints it
    serial: str
    pci_bus_id: str  # "00000008:01:00.0", the form nvmlPciInfo_t.busId carries
    minor_number: int  # N in /dev/nvidiaN
    module_id: int  # the GPU's position on the tray's board, 1-based
    ib_guid: bytes  # 8 bytes on Blackwell


class Node(msgspec.Struct, frozen=True, kw_only=True):
    """One compute tray, which is one Kubernetes node."""

    name: str
    address: str  # the node's own loopback address in 127.0.0.0/8
    rack: str
    rack_index: int
    tray_index: int  # 0-based among the rack's compute trays
    slot_number: int  # physical slot in the chassis, counting switch trays too
    cluster_uuid: str  # canonical form of the rack's NVLink domain clusterUuid
    clique_id: int
    chassis_serial: str
    driver: DriverSpec
    gpus: tuple[Gpu, ...]
    # What the scheduler checks besides GPUs: labels the kubelet adds, taints it registers
    # the node with, and capacity/allocatable overrides by resource name ("ephemeral-storage").
    labels: dict[str, str] = msgspec.field(default_factory=dict)
    taints: tuple[TaintSpec, ...] = ()
    allocatable: dict[str, str] = msgspec.field(default_factory=dict)
    nvlink: bool = True
    """False: the node has no multi-node NVLink (no fabric, no clique)."""
    gpu_api: GpuApi = "device-plugin"
    """How the node offers its GPUs: device plugin, NVIDIA's GPU DRA driver, or both."""

    @property
    def device_plugin(self) -> bool:
        """The kubelet reports allocatable ``nvidia.com/gpu``."""
        return self.gpu_api != "dra"

    @property
    def gpu_dra(self) -> bool:
        """NVIDIA's GPU DRA driver publishes the node's GPUs."""
        return self.gpu_api != "device-plugin"

    @property
    def cluster_uuid_bytes(self) -> bytes:
        """The 16 bytes nvmlGpuFabricInfo carries in clusterUuid."""
        return uuid.UUID(self.cluster_uuid).bytes

    @property
    def clique(self) -> str:
        """The node's clique, ``"<clusterUuid>.<cliqueId>"``: unique across racks; "" on a
        node without multi-node NVLink."""
        if not self.nvlink:
            return ""
        return f"{uuid.UUID(self.cluster_uuid)}.{self.clique_id}"


class Cluster(msgspec.Struct, frozen=True, kw_only=True):
    """Every node of the simulated cluster, rack by rack, trays in ascending order."""

    name: str
    nodes: tuple[Node, ...]

    def node(self, name: str) -> Node:
        """The node called ``name``; KeyError when there is none."""
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(name)

    @property
    def racks(self) -> dict[str, tuple[Node, ...]]:
        """Nodes grouped by rack name, in topology order."""
        grouped: dict[str, list[Node]] = {}
        for node in self.nodes:
            grouped.setdefault(node.rack, []).append(node)
        return {rack: tuple(nodes) for rack, nodes in grouped.items()}

    def first_racks(self, count: int | None) -> tuple[Node, ...]:
        """The nodes of the first ``count`` racks (every node when None), in topology order."""
        racks = list(self.racks.values())
        chosen = racks if count is None else racks[:count]
        return tuple(node for rack in chosen for node in rack)

    @property
    def cliques(self) -> dict[str, tuple[Node, ...]]:
        """Nodes grouped by their full clique string (never by cliqueId alone); nodes without
        multi-node NVLink are in none."""
        grouped: dict[str, list[Node]] = {}
        for node in self.nodes:
            if node.nvlink:
                grouped.setdefault(node.clique, []).append(node)
        return {clique: tuple(nodes) for clique, nodes in grouped.items()}
