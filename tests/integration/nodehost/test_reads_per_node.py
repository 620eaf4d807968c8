"""A node's services read what concerns their node and their clique, whatever the cluster's size.

The same node runs its real services (IMEX agent, health monitor, as the node host runs them) in
a simulated cluster of 2 racks and in one of 8. The API holds every node of the cluster with its
clique label, its GPU ResourceSlice and cdo's, a DeviceTaintRule of a faulted GPU and a pod bound
to it, as a busy cluster would; only the one node runs per-node services. The objects each
service's informers hold (``cdo_informer_objects``, per resource) are the same in both: a watch
or list whose result grows with the number of racks (every Node, every ResourceSlice, every pod)
fails this test.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import msgspec

from services.health_monitor.faults import Reaction
from services.health_monitor.gpuplan import rule_body
from shared.crds.names import DRIVER_NAME, GPU_DRA_DRIVER, IMEX_READY_CONDITION
from shared.kube.client import KubeClient
from shared.kube.errors import KubeApiError
from shared.kube.models import Node
from shared.kube.nodeslice import slice_manifest
from shared.kube.resources import DEVICE_TAINT_RULES, NODES, PODS, RESOURCE_SLICES
from sim.cluster import ClusterOptions, SimulatedCluster
from sim.natsserver import NatsServer
from sim.nodehost import NodeHost
from tests.integration.nodehost.conftest import fast_host
from tests.support.wait import wait_for

NODES_PER_RACK = 2
SERVICES = ("imex-agent", "health-monitor")
NAMESPACE = "default"

Held = dict[tuple[str, str], float]  # (service, resource) -> objects its informers hold


def topology_text(racks: int) -> str:
    base = f"127.{random.randint(64, 250)}.{random.randrange(0, 200, 8)}.0"
    lines = "".join(f"  - name: rack-{index}\n" for index in range(racks))
    return (
        f"name: reads-per-node\nnodes_per_rack: {NODES_PER_RACK}\naddress_base: {base}\n"
        f"racks:\n{lines}"
    )


async def fill(client: KubeClient, names: list[str]) -> bool:
    """What the API holds for every other node of a busy cluster (its labels come from the
    cluster's ``label_cliques``); whether the release serves DeviceTaintRules."""
    rules = True
    for name in names:
        node = msgspec.json.decode(await client.get(NODES, name), type=Node)
        for driver, device in ((GPU_DRA_DRIVER, "gpu-0"), (DRIVER_NAME, "channel-0")):
            body = slice_manifest(
                driver=driver,
                node=name,
                node_uid=node.metadata.uid,
                devices=[{"name": device}],
                generation=1,
                managed_by="test",
            )
            await client.create(RESOURCE_SLICES, body)
        try:
            await client.create(DEVICE_TAINT_RULES, rule_body(name, 0, Reaction.NO_SCHEDULE))
        except KubeApiError as exc:
            if not exc.not_found:
                raise
            rules = False  # a release that does not serve them
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"work-{name}", "namespace": NAMESPACE},
            "spec": {
                "nodeName": name,
                "containers": [{"name": "main", "image": "registry.test/app:1"}],
            },
        }
        await client.create(PODS, pod, namespace=NAMESPACE)
    return rules


def held_by(host: NodeHost, name: str) -> Held:
    held: Held = {}
    for service in SERVICES:
        registry = host[name].metrics[service].registry
        for metric in registry.collect():
            if metric.name != "cdo_informer_objects":
                continue
            for sample in metric.samples:
                held[(service, sample.labels["resource"])] = sample.value
    return held


@contextlib.asynccontextmanager
async def one_node_hosted(
    racks: int, nats_server: NatsServer
) -> AsyncIterator[tuple[KubeClient, NodeHost, str, bool]]:
    """A cluster of ``racks`` racks in the API; its first node runs its services."""
    state = Path(tempfile.mkdtemp(prefix="rpn-", dir="/tmp"))
    topology = state / "topology.yaml"
    topology.write_text(topology_text(racks))
    options = ClusterOptions(state_dir=state, topology=topology, label_cliques=True)
    try:
        async with SimulatedCluster.running(options) as cluster:
            hosted, *others = cluster.topology.nodes
            rules = await fill(cluster.client, [node.name for node in others])
            host = fast_host(cluster, [hosted], nats_url=nats_server.url, state=state)
            task = asyncio.create_task(host.run(), name="node host")
            try:
                yield cluster.client, host, hosted.name, rules
                assert not task.done(), task.exception()
            finally:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
    finally:
        shutil.rmtree(state, ignore_errors=True)


async def settled_reads(racks: int, nats_server: NatsServer) -> Held:
    async with one_node_hosted(racks, nats_server) as (client, host, name, rules):

        async def imex_ready() -> bool:
            node = msgspec.json.decode(await client.get(NODES, name), type=Node)
            ready = node.condition(IMEX_READY_CONDITION)
            return ready is not None and ready.status == "True"

        # The node's services at rest: its IMEX domain up.
        await wait_for(imex_ready, timeout=60, what=f"the node ImexReady at {racks} racks")
        # Every informer has listed (its sample appears with its first list): the agent's
        # clique roster, the monitor's own Node, its node's GPU slices and fault rules.
        listed = {
            ("imex-agent", "nodes"),
            ("health-monitor", "nodes"),
            ("health-monitor", "resourceslices"),
        } | ({("health-monitor", "devicetaintrules")} if rules else set())

        def settled() -> Held | None:
            if host[name].state != "running":
                return None
            held = held_by(host, name)
            return held if listed <= set(held) else None

        return await wait_for(settled, timeout=60, what=f"the node's informers at {racks} racks")


async def test_what_a_nodes_services_hold_does_not_grow_with_the_racks(
    nats_server: NatsServer,
) -> None:
    small = await settled_reads(2, nats_server)
    large = await settled_reads(8, nats_server)
    assert large == small
    # The agent's roster is its clique's nodes, the monitor reads its own Node alone.
    assert small[("imex-agent", "nodes")] == NODES_PER_RACK
    assert small[("health-monitor", "nodes")] == 1
