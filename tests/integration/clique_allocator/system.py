"""The whole system for end-to-end tests: the simulated cluster, a DRA plugin per node, a real
nats-server, and the domain controller and the clique allocator as real processes.

The simulated cluster puts the clique labels on its nodes (``label_cliques``), as the health
monitor would. Each node runs a small DRA plugin that prepares every claim with one CDI device
and publishes a ResourceSlice of four attachment devices, which is what the IMEX agent does for
the scheduler and the kubelet (its IMEX side is not needed to place and run pods). The domain
controller creates the DeviceClass and each domain's claim template; the allocator's webhook is
registered with the API server like the deploy manifests register it.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path

import msgspec

from shared.crds import COMPUTE_DOMAINS, PLACEMENTS, Placement, install_crds
from shared.crds.names import DRIVER_NAME
from shared.kube.models import Pod
from shared.kube.resources import NAMESPACES, PODS, RESOURCE_SLICES
from shared.kubeletapi import (
    Claim,
    KubeletPlugin,
    PluginPaths,
    PreparedDevice,
    PrepareResult,
    UnprepareResult,
)
from sim.cluster import ClusterOptions, SimulatedCluster
from sim.kubelet import KubeletSettings, LifecycleSettings
from sim.natsserver import NatsServer, free_port
from tests.support.processes import ProgramProcess
from tests.support.wait import wait_for

from .harness import Allocator, Api, Tls, gated, pinned

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "deploy" / "examples"
KUBECTL = Path(sys.executable).parent / "kubectl"
ATTACHMENTS_PER_NODE = 4

SERVICE_SETTINGS = {
    "CDO_SHUTDOWN_STEP_TIMEOUT_S": "3",
    "CDO_LOG_LEVEL": "info",
}
ALLOCATOR_SETTINGS = {
    "CDO_CLIQUE_ALLOCATOR_LEASE_NAMESPACE": "default",
    "CDO_CLIQUE_ALLOCATOR_INFORMER_BACKOFF_INITIAL_S": "0.05",
    "CDO_CLIQUE_ALLOCATOR_INFORMER_BACKOFF_MAX_S": "0.5",
    "CDO_CLIQUE_ALLOCATOR_RETRIES_BACKOFF_MAX_S": "0.5",
    "CDO_CLIQUE_ALLOCATOR_CAPACITY_INTERVAL_S": "0.05",
    "CDO_CLIQUE_ALLOCATOR_WEBHOOK_HOST": "127.0.0.1",
    "CDO_CLIQUE_ALLOCATOR_WEBHOOK_PORT": "0",
    "CDO_CLIQUE_ALLOCATOR_LEADER_ELECTION_LEASE_DURATION_S": "2",
    "CDO_CLIQUE_ALLOCATOR_LEADER_ELECTION_RENEW_DEADLINE_S": "1.5",
    "CDO_CLIQUE_ALLOCATOR_LEADER_ELECTION_RETRY_PERIOD_S": "0.2",
}
CONTROLLER_SETTINGS = {
    "CDO_DOMAIN_CONTROLLER_LEASE_NAMESPACE": "default",
    "CDO_DOMAIN_CONTROLLER_INFORMER_BACKOFF_INITIAL_S": "0.05",
    "CDO_DOMAIN_CONTROLLER_INFORMER_BACKOFF_MAX_S": "0.5",
    "CDO_DOMAIN_CONTROLLER_RETRIES_BACKOFF_MAX_S": "0.5",
}


class PodList(msgspec.Struct):
    items: list[Pod]


class PlacementList(msgspec.Struct):
    items: list[Placement]


class AttachmentDriver:
    """Every claim gets one CDI device of its node (the IMEX agent injects the channel)."""

    def __init__(self, node: str) -> None:
        self.node = node

    async def prepare(self, claims: Sequence[Claim]) -> Mapping[str, PrepareResult]:
        return {
            claim.uid: PrepareResult(
                devices=(
                    PreparedDevice(
                        pool_name=self.node,
                        device_name="attach-0",
                        cdi_device_ids=(f"cdo.dev/imex-channel={claim.name}",),
                    ),
                )
            )
            for claim in claims
        }

    async def unprepare(self, claims: Sequence[Claim]) -> Mapping[str, UnprepareResult]:
        return {claim.uid: UnprepareResult() for claim in claims}


class System:
    """The running system; see the module docstring."""

    def __init__(
        self,
        *,
        cluster: SimulatedCluster,
        api: Api,
        allocator: Allocator,
        controller: ProgramProcess,
        nats: NatsServer,
        workdir: Path,
    ) -> None:
        self.cluster = cluster
        self.api = api
        self.client = api.client
        self.allocator = allocator
        self.controller = controller
        self.nats = nats
        self.workdir = workdir

    @property
    def racks(self) -> dict[str, str]:
        """Clique of each rack."""
        return {rack: nodes[0].clique for rack, nodes in self.cluster.topology.racks.items()}

    def clique_of(self, node: str) -> str:
        return self.cluster.topology.node(node).clique

    async def kubectl(self, *args: str) -> str:
        process = await asyncio.create_subprocess_exec(
            str(KUBECTL), "--kubeconfig", str(self.cluster.kubeconfig), *args,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        )  # fmt: skip
        out, _ = await process.communicate()
        assert process.returncode == 0, out.decode()
        return out.decode()

    async def create_namespace(self, name: str) -> None:
        await self.client.create(
            NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        )

    async def pods(self, namespace: str, selector: str = "") -> list[Pod]:
        raw = await self.client.list(PODS, namespace=namespace, label_selector=selector)
        return msgspec.json.decode(raw, type=PodList).items

    async def placements(self) -> list[Placement]:
        return msgspec.json.decode(await self.client.list(PLACEMENTS), type=PlacementList).items

    async def placement(self, namespace: str, name: str) -> Placement | None:
        raw = await self.client.get_or_none(PLACEMENTS, name, namespace=namespace)
        return None if raw is None else msgspec.json.decode(raw, type=Placement)

    async def running(self, namespace: str, selector: str, count: int) -> list[Pod] | None:
        """The pods once exactly ``count`` run, ungated and pinned where they run."""
        found = [
            p for p in await self.pods(namespace, selector) if not p.metadata.deletion_timestamp
        ]
        if len(found) != count:
            return None
        if all(
            p.status.phase == "Running" and not gated(p) and pinned(p) == p.spec.node_name
            for p in found
        ):
            return found
        return None

    async def wait_running(
        self, namespace: str, selector: str, count: int, *, within_s: float = 60
    ) -> list[Pod]:
        return await wait_for(
            lambda: self.running(namespace, selector, count),
            timeout=within_s,
            interval=0.1,
            what=f"{count} pods {selector} running in {namespace}",
        )

    async def delete_everything_in(self, namespace: str) -> None:
        """Delete the namespace's workloads and domains; wait until their Placements are gone."""
        await self.kubectl("delete", "deployments,jobs", "--all", "-n", namespace, "--wait=false")
        await self.kubectl("delete", "computedomains", "--all", "-n", namespace, "--wait=false")

        async def gone() -> bool:
            domains = await self.client.list(COMPUTE_DOMAINS, namespace=namespace)
            placements = [p for p in await self.placements() if p.metadata.namespace == namespace]
            return b'"items":[]' in domains.replace(b" ", b"") and not placements

        await wait_for(gone, timeout=60, interval=0.1, what=f"{namespace} cleaned up")


def _env(**extra: str) -> dict[str, str]:
    return {**SERVICE_SETTINGS, **extra}


@contextlib.asynccontextmanager
async def running_system() -> AsyncIterator[System]:
    """Start everything (a few seconds); stop it all on exit."""
    state = Path(tempfile.mkdtemp(prefix="cdo-alloc-"))  # short: unix socket paths are limited
    options = ClusterOptions(
        state_dir=state,
        label_cliques=True,
        kubelet=KubeletSettings(lease_duration_s=4, heartbeat_interval_s=0.5),
        lifecycle=LifecycleSettings(node_monitor_grace_s=2, default_toleration_s=1),
    )
    nats = NatsServer(store_dir=state / "nats")
    processes: list[ProgramProcess] = []
    try:
        nats.start()
        nats.set_up_jetstream()
        async with (
            SimulatedCluster.running(options) as cluster,
            contextlib.AsyncExitStack() as plugins,
        ):
            client = cluster.client
            await install_crds(client)
            for node in cluster.topology.nodes:
                plugin = KubeletPlugin(
                    driver_name=DRIVER_NAME,
                    handler=AttachmentDriver(node.name),
                    paths=PluginPaths.for_driver(
                        DRIVER_NAME, kubelet_root=cluster.fleet.kubelet_root(node.name)
                    ),
                )
                await plugins.enter_async_context(plugin)
                await client.create(
                    RESOURCE_SLICES,
                    {
                        "apiVersion": "resource.k8s.io/v1",
                        "kind": "ResourceSlice",
                        "metadata": {"name": f"{node.name}-{DRIVER_NAME}"},
                        "spec": {
                            "driver": DRIVER_NAME,
                            "nodeName": node.name,
                            "pool": {"name": node.name, "generation": 1, "resourceSliceCount": 1},
                            "devices": [
                                {"name": f"attach-{i}"} for i in range(ATTACHMENTS_PER_NODE)
                            ],
                        },
                    },
                )
            common = {
                "CDO_NATS_URL": nats.url,
                "CDO_NATS_RECONNECT_WAIT_S": "0.2",
                "CDO_HTTP_HOST": "127.0.0.1",
            }
            controller = ProgramProcess(
                "services.domain_controller",
                env=_env(
                    **common,
                    **CONTROLLER_SETTINGS,
                    CDO_HTTP_PORT=str(free_port()),
                    CDO_INSTANCE="dc-0",
                    CDO_DOMAIN_CONTROLLER_KUBECONFIG=str(cluster.kubeconfig),
                ),
                workdir=state,
                name="domain-controller",
            ).start()
            processes.append(controller)
            tls = Tls(state / "webhook-tls")
            port = free_port()
            allocator_process = ProgramProcess(
                "services.clique_allocator",
                env=_env(
                    **common,
                    **ALLOCATOR_SETTINGS,
                    CDO_HTTP_PORT=str(port),
                    CDO_INSTANCE="ca-0",
                    CDO_CLIQUE_ALLOCATOR_KUBECONFIG=str(cluster.kubeconfig),
                    CDO_CLIQUE_ALLOCATOR_WEBHOOK_CERT_FILE=str(tls.cert_file),
                    CDO_CLIQUE_ALLOCATOR_WEBHOOK_KEY_FILE=str(tls.key_file),
                ),
                workdir=state,
                name="clique-allocator",
            ).start()
            processes.append(allocator_process)
            allocator = Allocator(allocator_process, port=port)
            await allocator.wait_ready(within_s=30)
            api = Api(client)
            await api.register_webhook(tls, allocator.webhook_port)
            await api.register_conversion(tls, allocator.webhook_port)  # v1beta1 manifests
            yield System(
                cluster=cluster,
                api=api,
                allocator=allocator,
                controller=controller,
                nats=nats,
                workdir=state,
            )
            await asyncio.gather(*(asyncio.to_thread(p.stop) for p in processes))
    finally:
        for process in processes:
            process.stop()
        nats.stop()
        shutil.rmtree(state, ignore_errors=True)
