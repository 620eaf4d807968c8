"""The topology file's schema: what a person writes in ``sim/topologies/*.yaml``.

These Structs check types and ranges while decoding (msgspec reports the path of a bad
field); rules that need more than one field at a time live in :mod:`sim.topology.expand`.
Every field has a default, so an empty file describes the default cluster: two racks of
18 trays with 4 GPUs each, one clique per rack.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"

# An NVL72 rack has 18 compute trays; its platform info reports tray indices 0..17.
MAX_TRAYS_PER_RACK = 18
MAX_GPUS_PER_NODE = 8
MAX_CLIQUE_ID = 0xFFFF_FFFF  # cliqueId is an unsigned 32-bit field in nvmlGpuFabricInfo

Name = Annotated[str, msgspec.Meta(pattern=DNS_LABEL, max_length=40)]
TrayCount = Annotated[int, msgspec.Meta(ge=1, le=MAX_TRAYS_PER_RACK)]
GpuCount = Annotated[int, msgspec.Meta(ge=1, le=MAX_GPUS_PER_NODE)]
CliqueId = Annotated[int, msgspec.Meta(ge=0, le=MAX_CLIQUE_ID)]
GpuApi = Literal["device-plugin", "dra", "both"]


class DriverSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What the node's NVIDIA driver reports and which NVML struct versions it accepts."""

    version: Annotated[str, msgspec.Meta(pattern=r"^\d+\.\d+(\.\d+)?$")] = "570.133.20"
    # CUDA driver API version as NVML encodes it: 1000 * major + 10 * minor.
    cuda_version: Annotated[int, msgspec.Meta(ge=1000, le=99_990)] = 12080
    # Drivers before R570 know nvmlGpuFabricInfo_v2 only; False lets a consumer's fallback run.
    fabric_info_v3: bool = True


class CliqueSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One NVLink partition of a rack: the trays whose GPUs share ``id`` as cliqueId."""

    id: CliqueId
    # Tray indices as a list of ranges, e.g. "0-8" or "0-3,9,12-17"; a single tray may be an int.
    trays: str | int


LabelMap = dict[Annotated[str, msgspec.Meta(min_length=1, max_length=316)], str]
TaintEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


class TaintSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A taint the node's kubelet registers the node with (``--register-with-taints``)."""

    key: Annotated[str, msgspec.Meta(min_length=1, max_length=316)]
    value: str = ""
    effect: TaintEffect


class AllocatableSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What the node's kubelet reports as capacity and allocatable, instead of its defaults
    (Kubernetes quantities, e.g. ``"72"``, ``"480Gi"``); fields left out keep the default."""

    cpu: str | None = None
    memory: str | None = None
    ephemeral_storage: str | None = None
    pods: str | None = None


class NodeGroupSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Some trays of a rack that differ from the rest: their labels are added to the rack's,
    their taints replace the rack's, their allocatable fields override the rack's."""

    # Tray indices as a list of ranges, like a clique's trays.
    trays: str | int
    labels: LabelMap | None = None
    taints: tuple[TaintSpec, ...] | None = None
    allocatable: AllocatableSpec | None = None


class RackSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One NVLink domain. Fields left out take the topology-wide value."""

    name: Name
    # The NVLink domain's clusterUuid; derived from the topology and rack names when absent.
    cluster_uuid: str | None = None
    nodes: TrayCount | None = None
    gpus_per_node: GpuCount | None = None
    # Absent: the whole rack is one clique.
    cliques: tuple[CliqueSpec, ...] | None = None
    # Blackwell reports a 13-character chassis serial; derived when absent.
    chassis_serial: Annotated[str, msgspec.Meta(pattern=r"^[ -~]{1,16}$")] | None = None
    driver: DriverSpec | None = None
    # False: GPU servers without multi-node NVLink (an H100 HGX, say): fabric info reports
    # NOT_SUPPORTED, platform info is not supported, and the nodes belong to no clique.
    nvlink: bool = True
    # How the rack's nodes offer their GPUs: NVIDIA's device plugin (the kubelet reports
    # allocatable nvidia.com/gpu), NVIDIA's GPU DRA driver (devices in a gpu.nvidia.com
    # ResourceSlice, no nvidia.com/gpu), or both at once (a node part way through a migration,
    # where both describe the same GPUs). docs/simulated-gpu-driver.md
    gpu_api: GpuApi = "device-plugin"
    # What the scheduler checks besides GPUs, for every node of the rack: extra node labels
    # (e.g. a pool), taints registered with the node, allocatable overrides; node_groups set
    # them for some trays only.
    labels: LabelMap | None = None
    taints: tuple[TaintSpec, ...] | None = None
    allocatable: AllocatableSpec | None = None
    node_groups: tuple[NodeGroupSpec, ...] | None = None


def _default_racks() -> tuple[RackSpec, ...]:
    return (RackSpec(name="rack-0"), RackSpec(name="rack-1"))


class TopologySpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A simulated cluster: racks of trays (one Kubernetes node each) with their GPUs."""

    # Seeds every derived identifier, so two topologies with different names never share a UUID.
    name: Name = "sim"
    nodes_per_rack: TrayCount = MAX_TRAYS_PER_RACK
    gpus_per_node: GpuCount = 4
    # Placeholders: {topology}, {rack}, {rack_index}, {tray}.
    node_name: Annotated[str, msgspec.Meta(min_length=1)] = "{rack}-tray{tray:02d}"
    # Node addresses are <base> + 256 * rack_index + tray + 1, inside 127.0.0.0/8.
    address_base: str = "127.10.0.0"
    driver: DriverSpec = msgspec.field(default_factory=DriverSpec)
    racks: tuple[RackSpec, ...] = msgspec.field(default_factory=_default_racks)
