"""Simulated kubelets, one per topology node, and the node lifecycle controller.

    from sim.kubelet import KubeletFleet, NodeLifecycleController, connect_for_kubelets

    client = await connect_for_kubelets(kubeconfig, kubelets=len(cluster.nodes))
    fleet = KubeletFleet(cluster, client=client, root=state_dir / "nodes")
    supervisor.start("kubelets", fleet.run())
    supervisor.start("node lifecycle", NodeLifecycleController(client=client).run())

    fleet.kubelet_root("rack-0-tray03")     # the node's DRA plugin registers below it
    fleet["rack-0-tray03"].power_off()      # NotReady after the grace period, pods evicted
    fleet["rack-0-tray03"].power_on()

One kubelet alone: ``SimulatedKubelet(node, client=client, plugins_dir=...)`` and its ``run()``.

A kubelet registers its Node, keeps it Ready with a Lease, and runs the pods bound to it:
their ResourceClaims are prepared through the node's DRA kubelet plugins (found in
``plugins_dir`` over the plugin-registration gRPC protocol) and the CDI ids they return are
recorded in the pod annotation ``sim.cdo.dev/cdi-devices``. What is faithful and what is
simplified: docs/simulated-kubelet.md. Names and annotation keys: :mod:`sim.kubelet.names`.
"""

from sim.kubelet.fleet import KubeletFleet, connect_for_kubelets
from sim.kubelet.kubelet import SimulatedKubelet
from sim.kubelet.lifecycle import NodeLifecycleController
from sim.kubelet.names import (
    CDI_DEVICES_ANNOTATION,
    EXIT_CODE_ANNOTATION,
    NODE_LEASE_NAMESPACE,
    RUN_SECONDS_ANNOTATION,
    TAINT_NOT_READY,
    TAINT_UNREACHABLE,
)
from sim.kubelet.settings import KubeletSettings, LifecycleSettings, NodeResources

__all__ = [
    "CDI_DEVICES_ANNOTATION",
    "EXIT_CODE_ANNOTATION",
    "NODE_LEASE_NAMESPACE",
    "RUN_SECONDS_ANNOTATION",
    "TAINT_NOT_READY",
    "TAINT_UNREACHABLE",
    "KubeletFleet",
    "KubeletSettings",
    "LifecycleSettings",
    "NodeLifecycleController",
    "NodeResources",
    "SimulatedKubelet",
    "connect_for_kubelets",
]
