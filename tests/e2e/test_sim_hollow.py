"""Hollow racks on the whole system: ``cdo sim up --racks 8 --full-racks 1``.

Every one of the 144 nodes is in the API, Ready, with its clique label, ``ImexReady`` and its
channel ResourceSlice; only rack-0's 18 nodes run the IMEX agent and health monitor (the node
host hosts them alone, and only they have service identities); the control plane places an
18 x 4-GPU domain on a hollow rack and one on the full rack, and both become Ready with every
pod Running on that rack. The node host counts what a full node's services' informers hold
(docs/simulator.md#hollow-racks)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import msgspec
import pytest
import pytest_asyncio

from shared.command_errors import CommandError
from shared.crds import COMPUTE_DOMAINS
from shared.crds.names import CLIQUE_LABEL, DRIVER_NAME, IMEX_READY_CONDITION, NVLINK_DOMAIN_LABEL
from shared.kube.models import ResourceSlice
from shared.kube.resources import DEPLOYMENTS, RESOURCE_SLICES
from sim import control as simctl
from sim.control.state import IDENTITIES_DIR, read_nodehost, require_cluster
from tests.e2e.whole_system import (
    SYSTEM_STEP_S,
    WholeSystem,
    deployment_object,
    domain_object,
    running_whole_system,
)
from tests.support.wait import wait_for

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.slow,
    pytest.mark.timeout(600),
]

RACKS = 8
NODES_PER_RACK = 18
FULL_RACK = "rack-0"
HOLLOW_RACK = "rack-5"
NAMESPACE = "hollow"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def system() -> AsyncIterator[WholeSystem]:
    async with running_whole_system(racks=RACKS, full_racks=1) as running:
        await running.create_namespace(NAMESPACE)
        yield running


def rack_of(node: str) -> str:
    return node.rsplit("-", 1)[0]


async def test_every_node_is_in_the_api_ready_with_its_clique_and_slice(
    system: WholeSystem,
) -> None:
    nodes = await system.nodes()
    assert len(nodes) == RACKS * NODES_PER_RACK
    for node in nodes:
        assert node.metadata.labels.get(CLIQUE_LABEL), node.metadata.name
        statuses = {c.type: c.status for c in node.status.conditions}
        assert statuses.get("Ready") == "True", node.metadata.name
        assert statuses.get(IMEX_READY_CONDITION) == "True", node.metadata.name
        assert node.status.allocatable.get("nvidia.com/gpu") == "4", node.metadata.name
    slices = msgspec.json.decode(await system.client.list(RESOURCE_SLICES), type=_Slices).items
    by_node = {
        s.spec.node_name: len(s.spec.devices) for s in slices if s.spec.driver == DRIVER_NAME
    }
    assert by_node == {node.metadata.name: 8 for node in nodes}
    cluster = require_cluster(system.state_dir)
    listed = simctl.request(cluster.control_url, "GET", "/nodes")
    hollow = {entry["name"] for entry in listed if entry["hollow"]}
    assert {rack_of(name) for name in hollow} == {f"rack-{i}" for i in range(1, RACKS)}
    assert len(hollow) == (RACKS - 1) * NODES_PER_RACK
    with pytest.raises(CommandError, match="hollow node: it has no power switch"):
        simctl.request(cluster.control_url, "POST", f"/nodes/{HOLLOW_RACK}-tray00/power/off")


async def test_only_the_full_rack_runs_per_node_services(system: WholeSystem) -> None:
    host = read_nodehost(system.state_dir)
    assert host is not None
    assert {rack_of(name) for name in host.nodes} == {FULL_RACK}
    assert len(host.nodes) == NODES_PER_RACK
    for account in ("cdo-imex-agent", "cdo-health-monitor"):
        issued = {p.stem for p in (system.state_dir / IDENTITIES_DIR / account).iterdir()}
        assert issued == set(host.nodes), account


async def test_a_domain_on_a_hollow_rack_and_one_on_the_full_rack_become_ready(
    system: WholeSystem,
) -> None:
    nodes = {node.metadata.name: node for node in await system.nodes()}
    domains = {"on-hollow": HOLLOW_RACK, "on-full": FULL_RACK}
    for name, rack in domains.items():
        nvlink_domain = nodes[f"{rack}-tray00"].metadata.labels[NVLINK_DOMAIN_LABEL]
        await system.client.create(COMPUTE_DOMAINS, domain_object(name), namespace=NAMESPACE)
        deployment = deployment_object(name, replicas=NODES_PER_RACK, gpus=4)
        deployment["spec"]["template"]["spec"]["nodeSelector"] = {
            NVLINK_DOMAIN_LABEL: nvlink_domain
        }
        await system.client.create(DEPLOYMENTS, deployment, namespace=NAMESPACE)
    for name, rack in domains.items():
        domain = await system.wait_domain_ready(NAMESPACE, name, nodes=NODES_PER_RACK)
        members = {member.name for member in domain.status.nodes}
        assert {rack_of(node) for node in members} == {rack}, name

    async def all_running() -> bool:
        pods = await system.pods(NAMESPACE)
        return len(pods) == 2 * NODES_PER_RACK and all(
            pod.status.phase == "Running" for pod in pods
        )

    await wait_for(all_running, timeout=SYSTEM_STEP_S, what="every pod of both domains Running")


async def test_the_node_host_counts_a_full_nodes_informer_objects(system: WholeSystem) -> None:
    census = system.informer_census(f"{FULL_RACK}-tray03")
    assert set(census) == {"imex-agent", "health-monitor"}
    for service, held in census.items():
        assert held, f"{service} holds no informer"
        assert all(isinstance(count, int) and count >= 0 for count in held.values())
    assert census["health-monitor"].get("nodes", 0) >= 1  # it watches at least its own Node


class _Slices(msgspec.Struct):
    items: list[ResourceSlice]
