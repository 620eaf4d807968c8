"""Every node's kubelet of a simulated cluster, run together in one process.

    client = await connect_for_kubelets(kubeconfig, kubelets=len(cluster.nodes))
    fleet = KubeletFleet(cluster, client=client, root=state_dir / "nodes")
    supervisor.start("kubelets", fleet.run())
    fleet.kubelet_root("rack-0-tray00")   # where that node's DRA plugin puts its sockets
    fleet["rack-0-tray00"].power_off()

Each kubelet holds two watches open (its Node and its pods), and every watch holds one HTTP
connection of its client; :func:`connect_for_kubelets` sizes the client's connection pool for
that (kubernetes-asyncio allows 100 by default, which 50 kubelets would use up).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from kubernetes_asyncio import client as k8s
from kubernetes_asyncio import config as k8s_config

from shared.kube.client import KubeClient
from shared.kube.informer import InformerSettings
from shared.kubeletapi.sockets import unix_address
from shared.metrics import Metrics
from sim.kubelet.kubelet import SimulatedKubelet
from sim.kubelet.settings import KubeletSettings
from sim.topology import Cluster
from sim.topology import Node as TopologyNode

WATCHES_PER_KUBELET = 2
# Connections beyond the watches, for the kubelets' requests.
SPARE_CONNECTIONS = 64


async def connect_for_kubelets(
    kubeconfig: str | Path, *, kubelets: int, request_timeout_s: float = 30.0
) -> KubeClient:
    """A client from ``kubeconfig`` whose connection pool fits ``kubelets`` kubelets."""
    configuration = k8s.Configuration()
    await k8s_config.load_kube_config(
        config_file=str(kubeconfig), client_configuration=configuration
    )
    configuration.connection_pool_maxsize = WATCHES_PER_KUBELET * kubelets + SPARE_CONNECTIONS
    return KubeClient(k8s.ApiClient(configuration), request_timeout_s=request_timeout_s)


class KubeletFleet:
    """One :class:`SimulatedKubelet` per node of ``cluster``, node roots under ``root``.

    A node's root is ``root/<node name>``; its DRA plugins register in ``plugins_registry``
    below it (``PluginPaths.for_driver(driver, kubelet_root=fleet.kubelet_root(name))``).
    ``labels(node)`` adds labels to a node's registration.
    """

    def __init__(
        self,
        cluster: Cluster,
        *,
        client: KubeClient,
        root: Path,
        settings: KubeletSettings | None = None,
        labels: Callable[[TopologyNode], Mapping[str, str]] | None = None,
        informer_settings: InformerSettings | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self._root = root
        self._kubelets = {
            node.name: SimulatedKubelet(
                node,
                client=client,
                plugins_dir=self.kubelet_root(node.name) / "plugins_registry",
                settings=settings,
                labels=labels(node) if labels is not None else None,
                informer_settings=informer_settings,
                metrics=metrics,
            )
            for node in cluster.nodes
        }
        for kubelet in self._kubelets.values():
            for socket in (
                kubelet.pod_resources_socket,
                kubelet.device_plugins_dir / "kubelet.sock",
            ):
                unix_address(socket)  # ConfigError now, naming the path, rather than at bind

    def kubelet_root(self, node_name: str) -> Path:
        """The node's kubelet directory (what /var/lib/kubelet is on a real node)."""
        return self._root / node_name

    def __getitem__(self, node_name: str) -> SimulatedKubelet:
        return self._kubelets[node_name]

    def __iter__(self) -> Iterator[SimulatedKubelet]:
        return iter(self._kubelets.values())

    def __len__(self) -> int:
        return len(self._kubelets)

    async def run(self) -> None:
        """Run every kubelet until cancelled; one that fails stops them all."""
        async with asyncio.TaskGroup() as group:
            for kubelet in self._kubelets.values():
                group.create_task(kubelet.run(), name=f"kubelet {kubelet.name}")
