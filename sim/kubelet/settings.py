"""Settings of a simulated kubelet and of the node lifecycle controller.

Defaults follow the real components (kubelet: lease every 10 s for 40 s, status every 10 s,
reported at least every 5 minutes; controller: 40 s grace, 300 s default toleration); tests
and the demo shrink them.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from msgspec import Meta

from shared.settings import Settings
from sim.kubeapi.releases import NEWEST_RELEASE


class NodeResources(Settings, frozen=True, kw_only=True):
    """What a node reports besides its GPUs (a GB200 tray: two Grace CPUs, 144 cores)."""

    cpu: Annotated[str, Meta(description="Capacity and allocatable cpu.")] = "144"
    memory: Annotated[str, Meta(description="Capacity and allocatable memory.")] = "960Gi"
    pods: Annotated[str, Meta(description="Pods the node accepts.")] = "110"
    ephemeral_storage: Annotated[str, Meta(description="Capacity of ephemeral-storage.")] = "3500Gi"


class KubeletSettings(Settings, frozen=True, kw_only=True):
    """Timing and identity of one simulated kubelet."""

    lease_duration_s: Annotated[
        int, Meta(description="spec.leaseDurationSeconds of the node's heartbeat Lease.", ge=1)
    ] = 40
    heartbeat_interval_s: Annotated[
        float, Meta(description="How often the node's Lease is renewed.", gt=0)
    ] = 10.0
    status_update_interval_s: Annotated[
        float, Meta(description="How often node status is computed (and patched if changed).", gt=0)
    ] = 10.0
    status_report_interval_s: Annotated[
        float, Meta(description="Unchanged node status is still patched this often.", gt=0)
    ] = 300.0
    instance_type: Annotated[
        str, Meta(description="Value of the node.kubernetes.io/instance-type label.")
    ] = "gb200"
    architecture: Annotated[str, Meta(description="kubernetes.io/arch (Grace is arm64).")] = "arm64"
    kubelet_version: Annotated[
        str,
        Meta(
            description="status.nodeInfo.kubeletVersion (the simulated cluster runs its "
            "kubelets at its own release: v1.<minor>.0-sim)."
        ),
    ] = f"v{NEWEST_RELEASE}.0-sim"
    resources: NodeResources = msgspec.field(default_factory=NodeResources)
    pod_workers: Annotated[
        int, Meta(description="Pods synced concurrently (never one pod twice at once).", ge=1)
    ] = 4
    retry_backoff_s: Annotated[
        float, Meta(description="First pause before a failed pod sync is retried.", gt=0)
    ] = 0.2
    retry_backoff_max_s: Annotated[
        float, Meta(description="Longest pause between retries of one pod.", gt=0)
    ] = 30.0
    plugin_scan_interval_s: Annotated[
        float, Meta(description="How often the plugins_registry directory is scanned.", gt=0)
    ] = 0.5
    plugin_call_timeout_s: Annotated[
        float, Meta(description="Deadline of one NodePrepare/UnprepareResources call.", gt=0)
    ] = 45.0
    default_toleration_s: Annotated[
        int,
        Meta(
            description="tolerationSeconds assumed for not-ready/unreachable NoExecute taints "
            "when a pod has no toleration for them (the DefaultTolerationSeconds admission).",
            ge=0,
        ),
    ] = 300
    gpu_devices: Annotated[
        Literal["topology", "plugin"],
        Meta(
            description="Where nvidia.com/gpu devices come from: 'plugin', only from a device "
            "plugin registered on the node's device-plugins socket (none until one registers, "
            "as on a real node); 'topology', the node's GPUs listed healthy until a plugin "
            "registers, for clusters run without one."
        ),
    ] = "topology"
    device_plugin_call_timeout_s: Annotated[
        float, Meta(description="Deadline of one Allocate/GetPreferredAllocation call.", gt=0)
    ] = 10.0


class LifecycleSettings(Settings, frozen=True, kw_only=True):
    """Timing of the node lifecycle controller."""

    node_monitor_grace_s: Annotated[
        float,
        Meta(description="A node whose heartbeat is older than this becomes Unknown.", gt=0),
    ] = 40.0
    default_toleration_s: Annotated[
        int,
        Meta(
            description="tolerationSeconds assumed for not-ready/unreachable NoExecute taints "
            "when a pod has no toleration for them (the DefaultTolerationSeconds admission).",
            ge=0,
        ),
    ] = 300
    workers: Annotated[int, Meta(description="Nodes reconciled concurrently.", ge=1)] = 4
