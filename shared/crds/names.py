"""The names every cdo service agrees on (docs/architecture.md, "Names").

They are API: labels, finalizers, conditions and classes that users and other services see, so
each is defined once, here.
"""

from __future__ import annotations

NVIDIA_GROUP = "resource.nvidia.com"
"""API group of the ComputeDomain, kept from NVIDIA's driver so existing manifests apply."""
CDO_GROUP = "cdo.dev"
"""API group of cdo's own records (the Placement)."""

DRIVER_NAME = "compute-domain.cdo.dev"
"""The DRA driver that publishes channel-attachment devices (the IMEX agent)."""
CHANNEL_DEVICE_CLASS = "compute-domain-channel.cdo.dev"
"""DeviceClass a domain's claims request one attachment device from."""

DOMAIN_FINALIZER = "cdo.dev/compute-domain"
"""Finalizer the domain controller holds on a ComputeDomain until it has released everything."""
DOMAIN_LABEL = "cdo.dev/compute-domain"
"""On a domain's ResourceClaimTemplate and every claim made from it: the domain's name."""
DOMAIN_UID_LABEL = "cdo.dev/compute-domain-uid"
"""Next to :data:`DOMAIN_LABEL`: the domain's uid, which tells incarnations of a name apart."""

PLACEMENT_GATE = "cdo.dev/placement"
"""Scheduling gate on a domain's pods until the allocator has placed the gang."""
WRITTEN_BY_ANNOTATION = "cdo.dev/written-by"
"""On a Placement: the Kubernetes user that wrote it last. The ``cdo-placement-writer``
admission policy refuses a write whose value is not the writer's own user, and any writer but
the clique allocator; the IMEX agent grants a channel only from a Placement whose value is the
allocator's user (docs/security.md, "Placements")."""


def service_account_user(namespace: str, account: str) -> str:
    """The user a ServiceAccount's tokens authenticate as."""
    return f"system:serviceaccount:{namespace}:{account}"


INSTALL_NAMESPACE = "cdo-system"
"""The namespace deploy/ installs cdo in (an overlay may choose another)."""
CLIQUE_ALLOCATOR_ACCOUNT = "cdo-clique-allocator"
"""The clique allocator's ServiceAccount."""
ALLOCATOR_USER = service_account_user(INSTALL_NAMESPACE, CLIQUE_ALLOCATOR_ACCOUNT)
"""The allocator's user in the default install: its settings' default, and the writer the IMEX
agent expects by default."""

CLIQUE_LABEL = "nvidia.com/gpu.clique"
"""Node label: ``"<cluster UUID>.<clique id>"``, the node's NVLink partition."""
NVLINK_DOMAIN_LABEL = "cdo.dev/nvlink-domain"
MULTI_NODE_NVLINK_LABEL = "cdo.dev/multi-node-nvlink"
"""Node label the health monitor sets to "false" when no GPU of the node is on an NVLink fabric
(NVML fabric state NOT_SUPPORTED): a GPU node a domain can only run on without IMEX."""
"""Node label: the NVLink domain (cluster UUID, about one rack)."""

GPU_FAULT_TAINT = "cdo.dev/gpu-fault"
"""Taint the health monitor puts on a node with a GPU or fabric fault."""
BREAKER_ANNOTATION = "cdo.dev/gpu-fault-breaker"
"""Node annotation the health monitor writes on its own node: its circuit breaker record."""
BREAKER_VERDICT_ANNOTATION = "cdo.dev/gpu-fault-breaker-verdict"
"""Node annotation the clique allocator's leader writes: the circuit breaker's answer to the
node's record (a claim granted or refused, or room for a node held back)."""
GPU_HEALTHY_CONDITION = "cdo.dev/GpuHealthy"
"""Node condition written by the health monitor."""
IMEX_READY_CONDITION = "cdo.dev/ImexReady"
"""Node condition written by the IMEX agent: True while the node's IMEX daemon is READY."""
CDI_ENABLED_CONDITION = "cdo.dev/CdiEnabled"
"""Node condition written by the IMEX agent: whether the node's container runtime injects CDI
devices (the channel a claim gets reaches its container only through CDI); True, False, or
Unknown when the agent cannot tell."""
CDI_ENABLED = "CdiEnabled"
CDI_DISABLED = "CdiDisabled"
CDI_UNKNOWN = "CdiUnknown"
"""The reasons of :data:`CDI_ENABLED_CONDITION`, one per status."""

CONVERSION_SERVICE = "cdo-clique-allocator"
"""The Service (in :data:`CONVERSION_SERVICE_NAMESPACE`) in front of the clique allocator, which
serves the ComputeDomain conversion webhook beside its pod webhook."""
CONVERSION_SERVICE_NAMESPACE = "cdo-system"
CONVERSION_PATH = "/convert"
"""Path the clique allocator serves the ComputeDomain ConversionReview on."""

NUM_NODES_ANNOTATION = "resource.nvidia.com/computedomain-num-nodes"
"""On a ComputeDomain stored as ``v1beta2``: ``v1beta1``'s ``spec.numNodes``, as NVIDIA's
converter keeps it (the name is NVIDIA's; :mod:`shared.crds.conversion`)."""
MAX_NUM_NODES = 100_000
"""The largest ``spec.numNodes`` (v1beta1) and so the largest value of that annotation."""

MAX_CHANNELS = 2048
"""IMEX channels per node: ``/dev/nvidia-caps-imex-channels/channel0`` .. ``channel2047``."""

PLACED_CONDITION = "cdo.dev/Placed"
"""Pod condition the clique allocator sets on a domain's pod it cannot place yet (False, with the
reason and message of the decision), and to True when it pins a pod that had waited."""
HOSTNAME_LABEL = "kubernetes.io/hostname"
"""Node label the allocator pins each placed pod to, through ``spec.nodeSelector``."""
GPU_RESOURCE = "nvidia.com/gpu"
"""The extended resource a node's GPUs are allocatable as and a pod requests them by."""
GPU_DRA_DRIVER = "gpu.nvidia.com"
"""NVIDIA's GPU DRA driver and its DeviceClass: one device per GPU, pool = node name."""
GPU_DEVICE_CLASS = "gpu.nvidia.com"
"""The DeviceClass NVIDIA's chart installs for whole GPUs; claims name it to ask for GPUs."""
GPU_DEVICE_TYPE = "gpu"
"""The ``type`` attribute of a whole-GPU device (MIG and VFIO devices carry other types)."""
GPU_DEVICE_TAINT = "cdo.dev/gpu-fault"
"""The key of the DeviceTaintRule taint the health monitor puts on a faulted DRA GPU."""
IMEX_SLOT_ANNOTATION = "cdo.dev/imex-slot"
"""Node annotation written by the IMEX agent: the node's IMEX slot (tray index) in its clique."""
IMEX_CLIQUE_ANNOTATION = "cdo.dev/imex-clique"
"""Node annotation written by the IMEX agent: the clique its slot annotation was written for."""
TRACE_CONTEXT_ANNOTATION = "cdo.dev/trace-context"
"""On a ComputeDomain (and copied onto its Placement): the W3C traceparent of the domain's trace.
The domain controller writes it on the first reconcile unless set at creation (docs/events.md)."""
FAULT_TRACE_CONTEXT_ANNOTATION = "cdo.dev/fault-trace-context"
"""On a Node with an open fault episode (health monitor), and on a ComputeDomain going through
that fault (domain controller; copied onto its Placement): the traceparent of the fault's trace."""


def gpu_device_name(index: int) -> str:
    """The DRA device name NVIDIA's GPU driver gives the GPU with this NVML index."""
    return f"gpu-{index}"
